// A native app signing a person in through lanyard's provider in the
// system browser (RFC 8252): headless Chromium is the browser, and the
// app is this script, a public client with PKCE (S256) built on panva's
// openid-client, receiving the redirect on a loopback listener at
// whatever port the system gave it (RFC 8252 §7.3). Its client is
// registered as `http://127.0.0.1/native/cb`, without a port.
// tests/it/oidc_native.rs starts lanyard and runs it, once per mode:
//
//   - sign-in (NATIVE_REFUSED unset): the app opens the authorization
//     URL for `http://127.0.0.1:PORT/native/cb`, the person presses
//     "Verify with my wallet" and "Present" in the mock wallet, Chromium
//     lands on the app's listener, and openid-client checks state and
//     iss, redeems the code at `/token` with the code verifier and that
//     same redirect URI, and checks the ID token (signature against the
//     JWKS, iss, aud, nonce). Reports `{"event":"signed_in",…}` with the
//     callback, the token request's form and the ID token's claims.
//   - refused (NATIVE_REFUSED, a JSON list of redirect URIs, `{port}`
//     standing for the app's port): Chromium opens authorization URLs
//     for each, and the script reports `{"event":"refused",…}` with what
//     Chromium showed, what the app's listener heard meanwhile, and what
//     it heard of a request for the app's own redirect URI afterwards.
//
// Anything else ends with `{"event":"failed",…}` and exit code 1.

import { createServer } from 'node:http';
import { once } from 'node:events';

import * as client from 'openid-client';

import {
  STEP_TIMEOUT_MS, authorizationRequest, launch, report, required, run, trace, verifyWithWallet,
} from './browser.mjs';

/** The path the app's client registered, on 127.0.0.1 and no port. */
const CALLBACK_PATH = '/native/cb';

run(async () => {
  const base = required('OIDC_BASE');
  const issuer = required('OIDC_ISSUER');
  const clientId = required('OIDC_CLIENT_ID');
  const refused = process.env.NATIVE_REFUSED;

  const app = await loopbackReceiver();
  const config = await configuration(base, issuer, clientId);
  const { browser, context } = await launch();
  try {
    if (refused) {
      report('refused', { port: app.port, ...(await openRefused(context, config, app, JSON.parse(refused))) });
    } else {
      report('signed_in', await signIn(context, config, app));
    }
  } finally {
    await browser.close();
    app.server.close();
  }
});

/**
 * The provider's metadata as discovery serves it, for openid-client. The
 * Rust test's provider listens on a port its issuer does not name (it
 * binds 127.0.0.1:0 in-process), so its endpoints are reached under
 * `base` instead; the issuer, which the ID token and the redirect's `iss`
 * must carry, is left as it is.
 */
async function configuration(base, issuer, clientId) {
  const answer = await fetch(`${base}/.well-known/openid-configuration`);
  if (!answer.ok) {
    throw new Error(`discovery answered ${answer.status}`);
  }
  const metadata = await answer.json();
  if (metadata.issuer !== issuer) {
    throw new Error(`discovery names the issuer ${metadata.issuer}, not ${issuer}`);
  }
  for (const [name, value] of Object.entries(metadata)) {
    if (name !== 'issuer' && typeof value === 'string' && value.startsWith(`${issuer}/`)) {
      metadata[name] = base + value.slice(issuer.length);
    }
  }
  // A native app holds no secret (RFC 8252 §8.4): PKCE alone binds the code.
  const config = new client.Configuration(metadata, clientId, undefined, client.None());
  client.allowInsecureRequests(config);
  client.enableNonRepudiationChecks(config);
  return config;
}

/**
 * The app's redirect receiver on 127.0.0.1 at a port the system picks
 * (RFC 8252 §7.3): it keeps every request's path and query and resolves
 * `callback` with the first one's URL.
 */
async function loopbackReceiver() {
  let arrived;
  const callback = new Promise((resolve, reject) => {
    arrived = resolve;
    setTimeout(() => reject(new Error('the browser never came back to the app')), 3 * STEP_TIMEOUT_MS).unref();
  });
  // Awaited only once the browser is sent there, which in the refused
  // mode comes after every refused request: no unhandled rejection
  // should the timer fire first.
  callback.catch(() => {});
  const app = { callback, requests: [] };
  app.server = createServer((request, response) => {
    app.requests.push(request.url);
    response
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end('<!doctype html><link rel="icon" href="data:,"><title>Native app</title><p id="back">Back in the app: you can close this window.</p>');
    arrived(new URL(request.url, `http://127.0.0.1:${app.port}`));
  });
  app.server.listen(0, '127.0.0.1');
  await once(app.server, 'listening');
  app.port = app.server.address().port;
  return app;
}

/** The whole login at the app's own port, and the code's redemption. */
async function signIn(context, config, app) {
  const redirectUri = `http://127.0.0.1:${app.port}${CALLBACK_PATH}`;
  const request = await authorizationRequest(config, redirectUri);
  const page = await context.newPage();
  trace(page, 'system browser');
  const shown = await page.goto(request.url.href);
  if (shown.status() !== 200) {
    throw new Error(`GET ${request.url.href} answered ${shown.status()}: ${await shown.text()}`);
  }
  const person = await verifyWithWallet(page, 'present');
  const callbackUrl = await app.callback;
  await page.locator('#back').waitFor();

  // What the app sends to the token endpoint, as it went.
  const tokenRequests = [];
  config[client.customFetch] = (url, options) => {
    if (String(url) === config.serverMetadata().token_endpoint) {
      tokenRequests.push(Object.fromEntries(new URLSearchParams(String(options.body))));
    }
    return fetch(url, options);
  };
  const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
    pkceCodeVerifier: request.codeVerifier,
    expectedState: request.state,
    expectedNonce: request.nonce,
    idTokenExpected: true,
  });
  const [sent] = tokenRequests;
  return {
    ...person,
    port: app.port,
    redirect_uri: redirectUri,
    callback: { origin: callbackUrl.origin, pathname: callbackUrl.pathname, ...Object.fromEntries(callbackUrl.searchParams) },
    expected_state: request.state,
    expected_nonce: request.nonce,
    token_request: {
      grant_type: sent?.grant_type,
      client_id: sent?.client_id,
      redirect_uri: sent?.redirect_uri,
      code_verifier_sent: sent?.code_verifier === request.codeVerifier,
    },
    id_token: tokens.claims(),
    app_requests: app.requests,
  };
}

/**
 * Opens an authorization URL for each of `templates` (`{port}` the app's
 * port) in a page of its own, once as a login asks and once with
 * `prompt=none`, which a provider that took the redirect URI answers at
 * once with a redirect to it (OpenID Connect Core §3.1.2.6): what
 * Chromium showed of each, and the requests the app's listener heard.
 * Then, so that hearing nothing means something, the same with the
 * app's own redirect URI, which must reach the listener.
 */
async function openRefused(context, config, app, templates) {
  const shown = [];
  for (const template of templates) {
    for (const prompt of [null, 'none']) {
      shown.push(await open(context, config, template.replaceAll('{port}', String(app.port)), prompt));
    }
  }
  const heard = [...app.requests];
  const control = await open(context, config, `http://127.0.0.1:${app.port}${CALLBACK_PATH}`, 'none');
  await app.callback;
  return { shown, heard, control: { ...control, heard: app.requests.slice(heard.length) } };
}

/** What Chromium shows for an authorization request for `redirectUri`. */
async function open(context, config, redirectUri, prompt) {
  const { url } = await authorizationRequest(config, redirectUri);
  if (prompt) {
    url.searchParams.set('prompt', prompt);
  }
  const page = await context.newPage();
  trace(page, redirectUri);
  let answer;
  let failed = null;
  try {
    answer = await page.goto(url.href);
    // Until the page has loaded and made no request for a while: had its
    // page sent the browser on, the app's listener would have heard it.
    await page.waitForLoadState('networkidle');
  } catch (err) {
    // Sent where Chromium cannot go (port 0 is ERR_UNSAFE_PORT): not
    // lanyard's page either, which the Rust test tells from the rest.
    failed = String(err?.message ?? err).split('\n')[0];
  }
  const seen = {
    redirect_uri: redirectUri,
    prompt,
    status: answer?.status() ?? null,
    navigation_error: failed,
    url: page.url(),
    title: await page.title(),
    text: await page.locator('body').innerText(),
  };
  await page.close();
  return seen;
}
