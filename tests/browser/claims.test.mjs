// How the page shows what a session ended with, whatever the service's
// claims hold (issue 22): numbers digit for digit, control characters
// visible and bidi text isolated, long names wrapped, nested claims as
// nested lists, and lanyard's reason for a failure. One real session
// goes through the mock wallet and lanyard; the other tests check the
// page on its own: that start replayed, and polls answered with JSON text
// written here, as lanyard passes the service's claims on unchanged.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DESKTOP, PHONE, answerStatus, claimsShown, launch, newContext, openVerifier, replayStart,
  screenshot, scrollsSideways, startSession,
} from './support.mjs';

let browser;
// The one real start (see support.mjs on the start limit): its tab, and
// what /api/start answered.
let started;
let session;
before(async () => {
  browser = await launch();
  const context = await newContext(browser, DESKTOP);
  const page = await openVerifier(context);
  session = await startSession(page);
  started = { context, page };
});
after(() => browser?.close());

/** A verifier tab in a new `device` context whose polls answer `body()`. */
async function verifierAnswering(device, body) {
  const context = await newContext(browser, device);
  const page = await openVerifier(context);
  await replayStart(page, session);
  await answerStatus(page, body);
  return { context, page };
}

/** The page once it shows the claims `claims`, a JSON text. */
async function showing(device, claims) {
  const { context, page } = await verifierAnswering(device, () => `{"status":"verified","claims":${claims}}`);
  await startSession(page);
  await page.locator('#result').waitFor({ state: 'visible' });
  return { context, page };
}

/** The top-level dd for the claim `name`. */
const valueOf = (page, name) =>
  page.locator('#claims > dt').filter({ hasText: name }).locator('xpath=following-sibling::dd[1]');

test('claims a wallet presents reach the page unchanged, through the mock and lanyard', async () => {
  const { context, page } = started;
  // The mock wallet's present endpoint, under the request the QR code
  // names (openid4vp://?…&request_uri={mock}/mock/wallet/{transaction}).
  const request = new URL(session.request_uri).searchParams.get('request_uri');
  const presented = await fetch(`${request}/present`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: String.raw`{"document_number": 123456789012345678901234567890, "file": "\u202eevil.exe\u202c txt"}`,
  });
  assert.equal(presented.status, 200, await presented.text());

  await page.locator('#result').waitFor({ state: 'visible' });
  assert.deepEqual(await claimsShown(page), {
    'Document number': '123456789012345678901234567890',
    File: '⟨U+202E⟩evil.exe⟨U+202C⟩ txt',
  });
  await screenshot(page, 'claims-through-lanyard');
  await context.close();
});

test('a number beyond 64 bits, or one a double would change, shows digit for digit', async () => {
  const { context, page } = await showing(DESKTOP,
    '{"document_number": 123456789012345678901234567890, "height_m": 1.10, "huge": 1e400, "age": 42}');

  assert.deepEqual(await claimsShown(page), {
    'Document number': '123456789012345678901234567890',
    'Height m': '1.10',
    Huge: '1e400',
    Age: '42',
  });
  await screenshot(page, 'claims-big-number');
  await context.close();
});

test('without JSON.parse source text access, a number shows as JavaScript has it', async () => {
  const context = await newContext(browser, DESKTOP);
  // A browser before Chromium 114 calls the reviver with two arguments.
  await context.addInitScript(() => {
    const parse = JSON.parse;
    JSON.parse = (text, reviver) => parse(text, reviver && ((key, value) => reviver(key, value)));
  });
  const page = await openVerifier(context);
  const uncaught = [];
  page.on('pageerror', (error) => uncaught.push(error.message));
  await replayStart(page, session);
  await answerStatus(page, () => '{"status":"verified","claims":{"document_number":123456789012345678901234567890}}');
  await startSession(page);
  await page.locator('#result').waitFor({ state: 'visible' });

  assert.deepEqual(await claimsShown(page), { 'Document number': '1.2345678901234568e+29' });
  assert.deepEqual(uncaught, []);
  await context.close();
});

test('bidi controls and other control characters show as marks, in isolated text', async () => {
  // Escaped in the JSON text, as a service would send them.
  const { context, page } = await showing(DESKTOP, String.raw`{
    "file": "\u202eevil.exe\u202c txt",
    "label\u2067": "line 1\nline 2\u0000",
    "city": "القاهرة"
  }`);

  const file = valueOf(page, 'file');
  assert.equal(await file.textContent(), '⟨U+202E⟩evil.exe⟨U+202C⟩ txt');
  assert.equal(await file.locator('.control').count(), 2, 'each mark is a span of its own');
  assert.equal(await file.evaluate((dd) => getComputedStyle(dd).unicodeBidi), 'isolate');
  assert.equal(await file.getAttribute('dir'), 'auto');
  // Read as written: "evil" left of "exe", left of "txt", not reversed.
  const lefts = await file.evaluate((dd) => {
    const text = [...dd.childNodes].find((node) => node.nodeType === Node.TEXT_NODE && node.data.includes('evil'));
    const tail = [...dd.childNodes].find((node) => node.nodeType === Node.TEXT_NODE && node.data.includes('txt'));
    const leftOf = (node, word) => {
      const range = document.createRange();
      const at = node.data.indexOf(word);
      range.setStart(node, at);
      range.setEnd(node, at + word.length);
      return range.getBoundingClientRect().left;
    };
    return [leftOf(text, 'evil'), leftOf(text, 'exe'), leftOf(tail, 'txt')];
  });
  assert.ok(lefts[0] < lefts[1] && lefts[1] < lefts[2], `evil, exe, txt at x = ${lefts.join(', ')}`);

  assert.deepEqual(await claimsShown(page), {
    File: '⟨U+202E⟩evil.exe⟨U+202C⟩ txt',
    'label⟨U+2067⟩': 'line 1⟨U+000A⟩line 2⟨U+0000⟩',
    City: 'القاهرة',
  });
  const name = page.locator('#claims > dt').filter({ hasText: 'label' });
  assert.equal(await name.evaluate((dt) => getComputedStyle(dt).unicodeBidi), 'isolate');
  // dir=auto: right-to-left text reads from the right.
  assert.equal(await valueOf(page, 'City').evaluate((dd) => dd.matches(':dir(rtl)')), true);
  await screenshot(page, 'claims-bidi');
  await context.close();
});

test('a 200-character claim name wraps, and a phone never scrolls sideways', async () => {
  const longName = 'issuing_authority_of_the_document_'.repeat(6).slice(0, 200);
  const longValue = 'x'.repeat(300);
  const { context, page } = await showing(PHONE,
    JSON.stringify({ [longName]: 'Erika', given_name: longValue, family_name: 'Mustermann' }));

  assert.equal(await scrollsSideways(page), false);
  const width = await page.evaluate(() => window.innerWidth);
  for (const cell of await page.locator('#claims > dt, #claims > dd').all()) {
    const box = await cell.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= width, `${JSON.stringify(box)} within ${width} px`);
  }
  // Shown as a person reads a key: underscores as spaces, a capital first.
  const readable = longName.charAt(0).toUpperCase() + longName.slice(1).replace(/_/g, ' ');
  const name = page.locator('#claims > dt').first();
  assert.equal(await name.textContent(), readable);
  assert.ok((await name.boundingBox()).height > 40, 'the name wraps onto several lines');
  assert.equal(await valueOf(page, readable).textContent(), 'Erika');
  await screenshot(page, 'claims-long-name-phone');
  await context.close();
});

test('on a desktop, a 200-character claim name leaves the values in view', async () => {
  const longName = 'issuing_authority_of_the_document_'.repeat(6).slice(0, 200);
  const { context, page } = await showing(DESKTOP,
    JSON.stringify({ [longName]: 'Erika', family_name: 'Mustermann' }));

  assert.equal(await scrollsSideways(page), false);
  const list = await page.locator('#claims').boundingBox();
  const name = await page.locator('#claims > dt').first().boundingBox();
  assert.ok(name.width <= list.width * 0.4 + 1, `the name takes ${name.width} of ${list.width} px`);
  for (const value of await page.locator('#claims > dd').all()) {
    const box = await value.boundingBox();
    assert.ok(box.x + box.width <= list.x + list.width + 1, `${JSON.stringify(box)} within the list`);
  }
  await screenshot(page, 'claims-long-name-desktop');
  await context.close();
});

test('nested claims show as nested lists, empty ones as such, null as text, booleans as words', async () => {
  const { context, page } = await showing(DESKTOP, `{
    "address": {"street_address": "Heidestraße 17", "locality": "Köln", "postal_code": "51147"},
    "nationalities": ["DE", "FR"],
    "degrees": [{"type": "Bachelor of Science", "year": 2010}],
    "preferences": {},
    "aliases": [],
    "middle_name": null,
    "age_over_18": true,
    "age_over_65": false
  }`);

  const shown = await page.locator('#claims').evaluate((list) => {
    // A dd or li as a plain value: its text, a list's items, or a dl's entries.
    const read = (cell) => {
      const child = cell.firstElementChild;
      if (child?.matches('dl')) {
        return Object.fromEntries([...child.querySelectorAll(':scope > dt')]
          .map((dt) => [dt.textContent, read(dt.nextElementSibling)]));
      }
      if (child?.matches('ol')) return [...child.querySelectorAll(':scope > li')].map(read);
      return cell.textContent;
    };
    return Object.fromEntries([...list.querySelectorAll(':scope > dt')]
      .map((dt) => [dt.textContent, read(dt.nextElementSibling)]));
  });
  assert.deepEqual(shown, {
    // Top-level names readable, the address's parts under lanyard's
    // labels, other nested names as written; booleans as words.
    Address: { 'Street address': 'Heidestraße 17', City: 'Köln', 'Postal code': '51147' },
    Nationalities: ['DE', 'FR'],
    Degrees: [{ type: 'Bachelor of Science', year: '2010' }],
    Preferences: '(empty object)',
    Aliases: '(empty list)',
    'Middle name': 'null',
    'At least 18 years old': 'Yes',
    'At least 65 years old': 'No',
  });
  assert.equal(await page.locator('#claims').getByText('{').count(), 0, 'no JSON text');
  assert.equal(await valueOf(page, 'Aliases').locator('.note').count(), 1, 'set apart from a value');
  await screenshot(page, 'claims-nested');
  await context.close();
});

test("a failed session shows lanyard's reason in the page's words, when it gives one the page knows", async () => {
  const known = 'The verification service gave an answer this site cannot read. Please start again, or ask the site\'s operator.';
  let reason = 'not-a-reason-the-page-knows';
  const { context, page } = await verifierAnswering(DESKTOP,
    () => JSON.stringify({ status: 'failed', reason }));
  const error = page.getByRole('alert');

  // An id the page has no words for: its own general words.
  await startSession(page);
  await error.waitFor({ state: 'visible' });
  assert.equal(await error.textContent(), 'The verification failed. Please start again.');

  reason = 'answer-unreadable';
  await startSession(page, () => page.click('#restart'));
  await page.getByText(known).waitFor();
  assert.equal(await error.textContent(), known);
  assert.equal(await page.locator('#result').isVisible(), false);
  assert.equal(await page.locator('#restart').isVisible(), true);
  await screenshot(page, 'failed-with-message');
  await context.close();
});
