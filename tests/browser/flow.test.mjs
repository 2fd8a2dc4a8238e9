// The whole flow, as a person does it in the demo: start on the verifier
// page, open the mock wallet from its link (a new tab, on the mock's
// origin), present or decline there, and watch the verifier page, still
// polling, end with the claims or a message.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DESKTOP, VERIFIER_ORIGIN, launch, newContext, openVerifier, openWallet, presentAndSeeVerified,
  screenshot, startSession,
} from './support.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

test('presenting in the wallet shows the claims, and the page asks only its own origin', async () => {
  const context = await newContext(browser, DESKTOP);
  const requested = [];
  const page = await openVerifier(context, (tab) => {
    tab.on('request', (request) => requested.push(request.url()));
  });

  const session = await startSession(page);
  const wallet = await openWallet(context, page, '#same-device-link');
  assert.equal(wallet.url(), session.wallet_url);
  assert.notEqual(new URL(wallet.url()).origin, VERIFIER_ORIGIN, 'the mock wallet is another origin');
  assert.equal(await wallet.evaluate(() => window.opener), null, 'the wallet tab cannot reach back (noopener)');
  await presentAndSeeVerified(wallet, page);
  await screenshot(page, 'verified');

  const paths = requested.map((url) => new URL(url).pathname);
  assert.ok(paths.includes('/api/start') && paths.includes('/api/status'), `requests seen: ${requested.join(' ')}`);
  const elsewhere = requested.filter((url) => new URL(url).origin !== VERIFIER_ORIGIN);
  assert.deepEqual(elsewhere, [], 'the verifier page requested another origin');
  await context.close();
});

test('declining in the wallet ends with a message and no claims', async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);

  await startSession(page);
  const wallet = await openWallet(context, page, '#same-device-link');
  await wallet.click('#decline');
  assert.match(await wallet.locator('#outcome').textContent(), /^Declined\./);

  const status = page.locator('#status');
  await page.getByText('You declined to share a credential.').waitFor();
  assert.equal(await status.textContent(), 'You declined to share a credential. Nothing was shared.');
  assert.equal(await page.locator('#result').isVisible(), false);
  assert.equal(await page.locator('#claims > *').count(), 0);
  assert.equal(await page.locator('#restart').isVisible(), true);
  await screenshot(page, 'declined');
  await context.close();
});

test('another browser cannot read a session it did not start', async () => {
  const first = await newContext(browser, DESKTOP);
  const page = await openVerifier(first);
  const session = await startSession(page);
  const statusOf = (tab) => tab.evaluate(async (id) => {
    const response = await fetch(`/api/status?transactionId=${encodeURIComponent(id)}`);
    return response.status;
  }, session.transaction_id);

  // The cookie that binds the session is out of the page script's reach.
  const [cookie] = await first.cookies();
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, 'Strict');
  assert.equal(await page.evaluate(() => document.cookie), '');
  assert.equal(await statusOf(page), 200, 'the browser that started it can');

  const second = await newContext(browser, DESKTOP);
  const other = await openVerifier(second);
  assert.equal(await statusOf(other), 404);
  await second.close();
  await first.close();
});

test('answers lanyard did not make are retried, not taken as the end', async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);
  const uncaught = [];
  page.on('pageerror', (error) => uncaught.push(error.message));
  // What a balancer or a replica still starting might answer during a
  // deploy: its own 404 or 502, or a page of its own with 200; none
  // carries lanyard's `lanyard-error` header.
  const foreign = [
    { status: 404, contentType: 'text/plain', body: 'no server is available' },
    { status: 502, contentType: 'text/html', body: '<!doctype html><p>Bad gateway</p>' },
    { status: 200, contentType: 'text/html', body: '<!doctype html><p>Sign in</p>' },
  ];
  let served = 0;
  await page.route('**/api/status?*', (route) => {
    if (served < foreign.length) return route.fulfill(foreign[served++]);
    return route.continue();
  });

  await startSession(page);
  await page.getByText('Still trying…', { exact: false }).waitFor();
  const wallet = await openWallet(context, page, '#same-device-link');
  await wallet.click('#present');
  await page.locator('#result').waitFor({ state: 'visible' });
  assert.equal(served, foreign.length, 'every foreign answer was met, and retried');
  assert.equal(await page.locator('#error').isVisible(), false);
  assert.deepEqual(uncaught, []);
  await context.close();
});

test("lanyard's own 404 ends the flow with an offer to start again", async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);
  // A handle sealed under a key no replica holds any more.
  await page.route('**/api/status?*', (route) => {
    const url = new URL(route.request().url());
    url.searchParams.set('transactionId', 'AAAA');
    return route.continue({ url: url.toString() });
  });
  await startSession(page);
  const error = page.getByRole('alert');
  await error.waitFor({ state: 'visible' });
  assert.match(await error.textContent(), /start again/);
  assert.equal(await page.locator('#restart').isVisible(), true);
  await context.close();
});
