// What holds on every screen of the page: it works from the keyboard and
// tells assistive technology what happens, fits a phone, and runs under
// its Content-Security-Policy without a single violation.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  CONTENT_SECURITY_POLICY, DESKTOP, PHONE, VERIFIER_URL, launch, newContext, openVerifier, openWallet,
  scrollsSideways, startSession,
} from './support.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

test('status and errors are live regions for assistive technology', async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);

  const status = page.getByRole('status');
  assert.equal(await status.getAttribute('id'), 'status');
  assert.equal(await status.getAttribute('aria-live'), 'polite');
  assert.equal(await page.getByRole('alert', { includeHidden: true }).getAttribute('id'), 'error');
  await context.close();
});

test('the start button is reached with Tab and activated with Enter', async () => {
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);

  // The language switch comes first, one link per language; then the
  // start button.
  const languages = await page.locator('nav.languages a').count();
  for (let i = 0; i <= languages; i += 1) await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'start');
  await startSession(page, () => page.keyboard.press('Enter'));
  assert.match(await page.getByRole('status').textContent(), /Waiting for your wallet/);
  // The start button is gone: focus must land on what replaced it, not
  // fall back to the document, where a keyboard user loses their place.
  assert.equal(
    await page.evaluate(() => document.activeElement.closest('#present')?.id),
    'present',
    'focus is in the wallet section',
  );
  await context.close();
});

test('on a phone, the page never scrolls sideways', async () => {
  const context = await newContext(browser, PHONE);
  const page = await openVerifier(context);

  assert.equal(await scrollsSideways(page), false, 'before starting');
  await startSession(page);
  assert.equal(await scrollsSideways(page), false, 'with the wallet button');
  await page.click('#toggle-qr');
  await page.locator('#qr svg').waitFor({ state: 'visible' });
  assert.equal(await scrollsSideways(page), false, 'with the QR code shown');
  await context.close();
});

test('the page carries its CSP and breaks none of it through a whole flow', async () => {
  const context = await newContext(browser, DESKTOP);
  // Every violation fires this event; the page's console says it too.
  await context.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (event) => {
      window.cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI}`);
    });
  });
  const problems = [];
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  const response = await page.goto(VERIFIER_URL);
  assert.equal(response.headers()['content-security-policy'], CONTENT_SECURITY_POLICY);
  assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval/);

  // The QR code's SVG and the claims are inserted by the page's script.
  await startSession(page);
  await page.locator('#qr svg').waitFor();
  const wallet = await openWallet(context, page, '#same-device-link');
  await wallet.click('#present');
  await page.locator('#result').waitFor({ state: 'visible' });
  assert.deepEqual(problems, []);
  assert.deepEqual(await page.evaluate(() => window.cspViolations), []);

  // Both watches see a violation when there is one: an inline style.
  const logged = page.waitForEvent('console', (message) => message.type() === 'error');
  const directive = await page.evaluate(() => new Promise((resolve) => {
    document.addEventListener('securitypolicyviolation', (event) => resolve(event.violatedDirective), { once: true });
    const style = document.createElement('style');
    style.textContent = 'main { color: red; }';
    document.head.append(style);
  }));
  assert.equal(directive, 'style-src-elem');
  assert.match((await logged).text(), /Content Security Policy/);
  assert.equal((await page.evaluate(() => window.cspViolations)).length, 1);
  await context.close();
});
