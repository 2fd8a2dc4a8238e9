// How the page offers the wallet: a QR code on a desktop, a wallet button
// with the QR code one toggle away on a phone (docs/service.md §4.2 step 4).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DESKTOP, PHONE, decodeQr, launch, newContext, openVerifier, screenshot, startSession,
} from './support.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

test('on a desktop, the QR code encodes the request_uri /api/start answered', async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);

  const session = await startSession(page);
  await page.locator('#qr svg').waitFor();
  assert.equal(await decodeQr(page), session.request_uri);
  assert.equal(await page.locator('#same-device-link').getAttribute('href'), session.wallet_url);
  assert.equal(await page.locator('#on-this-device').isVisible(), false, 'no wallet button on a desktop');
  await screenshot(page, 'desktop-qr');
  await context.close();
});

test('on a phone, the wallet button opens wallet_url and the QR code is one toggle away', async () => {
  const context = await newContext(browser, PHONE);
  const page = await openVerifier(context);

  const session = await startSession(page);
  const button = page.locator('#wallet-button');
  assert.equal(await button.isVisible(), true);
  assert.equal(await button.getAttribute('href'), session.wallet_url);
  assert.equal(await button.getAttribute('target'), '_blank', 'the wallet opens in a new tab');
  assert.equal(await page.locator('#qr-panel').isVisible(), false, 'the QR code waits for the toggle');
  const toggle = page.locator('#toggle-qr');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  await screenshot(page, 'phone-wallet-button');

  await toggle.click();
  await page.locator('#qr svg').waitFor({ state: 'visible' });
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  assert.equal(await decodeQr(page), session.request_uri);
  await screenshot(page, 'phone-qr');
  await context.close();
});
