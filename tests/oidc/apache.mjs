// A person opening a page that Apache's mod_auth_openidc protects with
// lanyard as its OpenID Connect provider, in headless Chromium:
// Apache sends the browser to lanyard's authorization page, the person
// presents in the mock wallet, lanyard sends the browser back to Apache's
// redirect URI, Apache exchanges the code and shows the page. Reports
// `{"event":"authorizing",…}` with the authorization request Apache made,
// then `{"event":"protected",…}` with the page's text
// (tests/it/oidc_interop.rs starts Apache and lanyard, and reads both).

import { launch, report, required, run, trace, verifyWithWallet } from './browser.mjs';

run(async () => {
  const protectedUrl = required('APACHE_PROTECTED_URL');
  const issuer = required('OIDC_ISSUER');

  const { browser, context } = await launch();
  const page = await context.newPage();
  trace(page, 'apache');
  const shown = await page.goto(protectedUrl);
  const authorization = new URL(page.url());
  if (!authorization.href.startsWith(`${issuer}/authorize?`) || shown.status() !== 200) {
    throw new Error(`${protectedUrl} led to ${authorization.href} (${shown.status()}), not to ${issuer}/authorize: ${await shown.text()}`);
  }
  report('authorizing', { url: authorization.href, parameters: Object.fromEntries(authorization.searchParams) });

  const person = await verifyWithWallet(page, 'present');
  await page.waitForURL(protectedUrl);
  const claims = await page.locator('#claims').innerText();
  const url = page.url();
  await browser.close();
  report('protected', { ...person, url, claims });
});
