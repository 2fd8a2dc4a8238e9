// An OpenID Connect login through the page (docs/oidc.md): the demo's shop
// (a relying party in the mock) sends the browser to lanyard's
// authorization endpoint, the person presses the button and presents from
// the mock wallet, and the shop shows the ID token's claims. axe-core
// judges the page in each state against WCAG 2.1 A and AA.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DESKTOP, PHONE, VERIFIER_ORIGIN, launch, newContext, openVerifier, openWallet, screenshot,
  startSession, violations,
} from './support.mjs';

const SHOP_URL = process.env.BROWSER_TEST_SHOP_URL;

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

test('the plain page has no WCAG 2.1 A or AA violation, before and after starting, on both screens', async () => {
  for (const screen of [DESKTOP, PHONE]) {
    const context = await newContext(browser, screen);
    const page = await openVerifier(context);
    assert.deepEqual(await violations(page), [], 'before starting');
    await startSession(page);
    assert.deepEqual(await violations(page), [], 'while waiting for the wallet');
    await context.close();
  }
});

test('a login from the shop shows who asks, and the shop gets the claims, not the page', { skip: !SHOP_URL }, async () => {
  const context = await newContext(browser, DESKTOP);
  const shop = await context.newPage();
  await shop.goto(SHOP_URL);
  await Promise.all([shop.waitForURL((url) => url.origin === VERIFIER_ORIGIN), shop.click('#login')]);
  assert.equal(new URL(shop.url()).pathname, '/authorize');
  assert.match(await shop.locator('#asker').textContent(), /^Demo shop asks you to verify a credential/);
  assert.deepEqual(await violations(shop), [], 'the login page');
  await screenshot(shop, 'login-page');

  // The login's start carries its sealed request in the query.
  const isLoginStart = (response) => response.url().startsWith(`${VERIFIER_ORIGIN}/api/start?authorization=`);
  const [started] = await Promise.all([shop.waitForResponse(isLoginStart), shop.click('#start')]);
  assert.equal(started.status(), 200);
  await shop.locator('#present').waitFor({ state: 'visible' });
  assert.deepEqual(await violations(shop), [], 'the login page, waiting for the wallet');
  const wallet = await openWallet(context, shop, '#same-device-link');
  await wallet.click('#present');
  // The page sends the browser back to the shop, whose server redeemed
  // the code and shows the ID token's claims.
  await shop.waitForURL((url) => url.href === SHOP_URL, { timeout: 15_000 });
  const claims = await shop.locator('#claims').textContent();
  assert.match(claims, /Erika/);
  assert.match(claims, /birthdate/);
  await screenshot(shop, 'login-shop-logged-in');
  await context.close();
});
