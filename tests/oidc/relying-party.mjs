// A relying party built on panva's openid-client (OpenID Certified), as
// an app would use it, signing a person in through lanyard's provider
// with headless Chromium and the mock wallet. tests/it/oidc_interop.rs
// runs it, one sign-in per run:
//
//   1. it serves its redirect URI on 127.0.0.1 (a free port) and reports
//      `{"event":"listening","redirect_uri":…}`; the Rust test registers
//      that URI with lanyard, starts lanyard and writes the issuer URL on
//      this script's stdin;
//   2. it discovers the issuer, builds the authorization URL (PKCE S256,
//      state, nonce) and reports `{"event":"authorizing","url":…}`;
//   3. Chromium opens it, presses "Verify with my wallet", follows the
//      wallet link and presses OIDC_WALLET_ACTION ("present" or
//      "decline") in the mock wallet, and lanyard's page sends it back to
//      the redirect URI;
//   4. present: openid-client checks the authorization response (state,
//      iss), exchanges the code (authenticating as OIDC_CLIENT_AUTH says:
//      client_secret_basic or client_secret_post with OIDC_CLIENT_SECRET,
//      or none, a public client with only PKCE), checks the
//      ID token (signature against the JWKS, iss, aud, exp, iat, nonce)
//      and asks userinfo for the same subject, and the script reports
//      `{"event":"signed_in",…}` with what it got; decline: openid-client
//      checks state and iss and throws the error the provider sent, and
//      the script reports `{"event":"refused",…}`.
//
// Anything else ends with `{"event":"failed",…}` and exit code 1.

import { createServer } from 'node:http';
import { once } from 'node:events';

import * as client from 'openid-client';

import {
  STEP_TIMEOUT_MS, authorizationRequest, launch, readLine, report, required, run, trace, verifyWithWallet,
} from './browser.mjs';

run(async () => {
  const clientId = required('OIDC_CLIENT_ID');
  const authentication = clientAuthentication(required('OIDC_CLIENT_AUTH'));
  const action = required('OIDC_WALLET_ACTION');

  const { server, redirectUri, callback } = await redirectEndpoint();
  report('listening', { redirect_uri: redirectUri });
  const issuer = await readLine(process.stdin);

  const config = await client.discovery(
    new URL(issuer),
    clientId,
    undefined,
    authentication,
    // lanyard's issuer in these tests is plain http on loopback.
    { execute: [client.allowInsecureRequests] },
  );
  // Also check the ID token's signature against the provider's JWKS: by
  // default openid-client trusts the token endpoint's TLS for it.
  client.enableNonRepudiationChecks(config);

  const {
    url: authorizationUrl, codeVerifier, state, nonce,
  } = await authorizationRequest(config, redirectUri);
  report('authorizing', { url: authorizationUrl.href, metadata: config.serverMetadata() });

  const { browser, context } = await launch();
  const page = await context.newPage();
  trace(page, 'relying party');
  const shown = await page.goto(authorizationUrl.href);
  if (shown.status() !== 200) {
    throw new Error(`GET ${authorizationUrl.href} answered ${shown.status()}: ${await shown.text()}`);
  }
  const person = await verifyWithWallet(page, action);
  const callbackUrl = await callback;
  // The browser is back at the relying party: the redirect's page loaded.
  await page.locator('#back').waitFor();
  await browser.close();
  server.close();

  const checks = { pkceCodeVerifier: codeVerifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true };
  let tokens;
  try {
    tokens = await client.authorizationCodeGrant(config, callbackUrl, checks);
  } catch (err) {
    if (err instanceof client.AuthorizationResponseError) {
      // Thrown only once state and iss have been checked.
      report('refused', {
        ...person,
        callback: Object.fromEntries(callbackUrl.searchParams),
        error: err.error,
        error_description: err.error_description,
        expected_state: state,
      });
      return;
    }
    throw err;
  }
  const idToken = tokens.claims();
  const userinfo = await client.fetchUserInfo(config, tokens.access_token, idToken.sub);
  const [header] = tokens.id_token.split('.');
  report('signed_in', {
    ...person,
    callback: Object.fromEntries(callbackUrl.searchParams),
    expected_state: state,
    expected_nonce: nonce,
    token_type: tokens.token_type,
    expires_in: tokens.expires_in,
    scope: tokens.scope,
    id_token_header: JSON.parse(Buffer.from(header, 'base64url').toString()),
    id_token: idToken,
    userinfo,
  });
});

/** How the client authenticates at the token endpoint: `method`. */
function clientAuthentication(method) {
  switch (method) {
    case 'client_secret_basic':
      return client.ClientSecretBasic(required('OIDC_CLIENT_SECRET'));
    case 'client_secret_post':
      return client.ClientSecretPost(required('OIDC_CLIENT_SECRET'));
    case 'none':
      return client.None();
    default:
      throw new Error(`OIDC_CLIENT_AUTH is ${method}: client_secret_basic, client_secret_post or none`);
  }
}

/**
 * The redirect URI, served on a free loopback port: it answers a small
 * page and resolves `callback` with the URL the browser was sent to.
 */
async function redirectEndpoint() {
  let arrived;
  const callback = new Promise((resolve, reject) => {
    arrived = resolve;
    setTimeout(() => reject(new Error('the browser never came back to the redirect URI')), 3 * STEP_TIMEOUT_MS).unref();
  });
  const server = createServer((request, response) => {
    const url = new URL(request.url, redirectUri);
    if (url.pathname !== '/callback') {
      response.writeHead(404).end();
      return;
    }
    response
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end('<!doctype html><link rel="icon" href="data:,"><title>Relying party</title><p id="back">Back at the relying party.</p>');
    arrived(url);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const redirectUri = `http://127.0.0.1:${server.address().port}/callback`;
  return { server, redirectUri, callback };
}
