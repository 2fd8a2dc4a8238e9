// A person opening a page that Apache's mod_auth_openidc protects with
// lanyard as its OpenID Connect provider, in headless Chromium:
// Apache sends the browser to lanyard's authorization page (a redirect,
// or a form the page posts there), the person
// presses OIDC_WALLET_ACTION ("present" or "decline") in the mock
// wallet, and lanyard sends the browser back to Apache's redirect URI.
// Reports `{"event":"authorizing",…}` with the authorization request
// Apache made, then `{"event":"returned",…}` with Apache's answer at its
// redirect URI and, once presented, the protected page's text, or, once
// declined, where the protected page leads next
// (tests/it/oidc_interop.rs starts Apache and lanyard, and reads both).

import { launch, report, required, run, trace, verifyWithWallet } from './browser.mjs';

run(async () => {
  const protectedUrl = required('APACHE_PROTECTED_URL');
  const redirectUri = required('APACHE_REDIRECT_URI');
  const issuer = required('OIDC_ISSUER');
  const action = required('OIDC_WALLET_ACTION');

  const { browser, context } = await launch();
  const page = await context.newPage();
  trace(page, 'apache');
  // Apache redirects to lanyard's authorization endpoint, or, told to
  // post, answers a form the page submits there itself.
  const authorize = `${issuer}/authorize`;
  const authorizing = page.waitForRequest((request) => request.isNavigationRequest()
    && (request.url() === authorize || request.url().startsWith(`${authorize}?`)));
  await page.goto(protectedUrl);
  const request = await authorizing;
  const shown = await request.response();
  if (shown?.status() !== 200) {
    throw new Error(`${request.method()} ${request.url()} answered ${shown?.status()}: ${await shown?.text()}`);
  }
  const parameters = request.method() === 'POST'
    ? new URLSearchParams(request.postData() ?? '')
    : new URL(request.url()).searchParams;
  report('authorizing', { method: request.method(), url: request.url(), parameters: Object.fromEntries(parameters) });

  const returned = page.waitForResponse((response) =>
    response.url().startsWith(`${redirectUri}?`) && response.request().isNavigationRequest());
  const person = await verifyWithWallet(page, action);
  const atRedirectUri = await returned;
  const answer = {
    url: atRedirectUri.url(),
    status: atRedirectUri.status(),
    location: (await atRedirectUri.allHeaders()).location,
  };
  let claims;
  let again;
  if (action === 'present') {
    await page.waitForURL(protectedUrl);
    claims = await page.locator('#claims').innerText();
  } else {
    await page.waitForURL((url) => url.href.startsWith(`${redirectUri}?`));
  }
  const ended = { url: page.url(), text: await page.locator('body').innerText() };
  if (action !== 'present') {
    // Whatever Apache showed, it made no session: the protected page
    // sends the browser to lanyard again.
    await page.goto(protectedUrl);
    again = page.url();
  }
  await browser.close();
  report('returned', { ...person, redirect_uri: answer, ended, claims, again });
});
