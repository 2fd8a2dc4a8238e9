// Every word in the person's language (docs/translations.md): lanyard's
// own labels for claims, a count in a label in its plural form
// (Intl.PluralRules picking among the forms lanyard rendered), an error
// code's message rather than the server's English sentence (set apart as
// English when the page does not know the code), a retry said in one
// sentence, and lanyard's own pages for a refused login and a path with
// no page, in each language, styled as the page, under its CSP, passing
// axe-core. The expected words come from the Fluent files themselves.
//
// One real start, replayed (see support.mjs on the start limit).

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';

import {
  CONTENT_SECURITY_POLICY, DESKTOP, LOCALES, VERIFIER_ORIGIN, claimsShown, inLanguage, message,
  newContext, openVerifier, replaying as replayingIn, sharedStart, screenshot, startSession, variant, violations,
} from './support.mjs';

const TAGS = readdirSync(LOCALES).filter((f) => f.endsWith('.ftl')).map((f) => f.slice(0, -4)).sort();

// One real start, replayed wherever a test needs a session but not the
// server's answers.
const shared = sharedStart();

/** A desktop tab in language `tag` whose start replays the real one and whose polls answer `poll()`. */
const replaying = (tag, poll) => replayingIn(shared.browser, shared.session, DESKTOP, tag, poll);

/** The claims `claims` as the page in `tag` shows them. */
async function shownIn(tag, claims) {
  const { context, page } = await replaying(tag, () => JSON.stringify({ status: 'verified', claims }));
  await startSession(page);
  await page.locator('#result').waitFor({ state: 'visible' });
  const shown = await claimsShown(page);
  return { context, page, shown };
}

test('age_over_NN takes the plural form of each count in Polish and Arabic, and lanyard labels the claims', async () => {
  const ages = (list) => Object.fromEntries(list.map((n) => [`age_over_${n}`, true]));
  const pl = await shownIn('pl', { ...ages([1, 2, 5, 22, 25]), given_name: 'Erika', address: { postal_code: '51147' } });
  assert.deepEqual(Object.keys(pl.shown), [
    'Ukończony 1 rok', 'Ukończone 2 lata', 'Ukończone 5 lat', 'Ukończone 22 lata', 'Ukończone 25 lat',
    message('pl', 'claim-given_name'), message('pl', 'claim-address'),
  ]);
  // A part of a claim under its own label, within the claim.
  assert.equal(await pl.page.locator('#claims dl.claims > dt').textContent(), message('pl', 'claim-address-postal_code'));
  await screenshot(pl.page, 'pl-claims-plural');
  await pl.context.close();

  const ar = await shownIn('ar', ages([0, 1, 2, 3, 11, 100]));
  assert.deepEqual(Object.keys(ar.shown), [
    'العمر 0 عام أو أكثر', 'العمر عام واحد أو أكثر', 'العمر عامان أو أكثر',
    'العمر 3 أعوام أو أكثر', 'العمر 11 عامًا أو أكثر', 'العمر 100 عام أو أكثر',
  ]);
  await screenshot(ar.page, 'ar-claims-plural');
  await ar.context.close();

  const en = await shownIn('en', { age_over_21: true, unknown_thing: 'x', email: 'e@example.com' });
  assert.deepEqual(Object.keys(en.shown), ['At least 21 years old', 'Unknown thing', message('en', 'claim-email')]);
  await en.context.close();
});

/** Answers the tab's next starts with lanyard's error `code`, its sentence `sentence`. */
function refuseStarts(page, status, code, sentence) {
  return page.route(new URL('/api/start', VERIFIER_ORIGIN).href, (route) => route.fulfill({
    status,
    headers: { 'lanyard-error': code },
    contentType: 'application/json',
    body: JSON.stringify({ error: code, message: sentence }),
  }));
}

test("a known code shows the page's own sentence, never the server's, and an unknown one shows the server's as English", async () => {
  const context = await newContext(shared.browser, DESKTOP);
  const page = await openVerifier(context, () => {}, inLanguage('ar'));
  await refuseStarts(page, 413, 'payload_too_large', 'The request body is too large.');
  await page.click('#start');
  await page.locator('#error').waitFor({ state: 'visible' });
  assert.equal(await page.locator('#error').textContent(), message('ar', 'error-payload_too_large'));

  await page.unroute(new URL('/api/start', VERIFIER_ORIGIN).href);
  await refuseStarts(page, 400, 'a_code_from_a_newer_lanyard', 'Something new went wrong.');
  await page.click('#restart');
  await page.locator('#error span[lang="en"]').waitFor();
  const shown = await page.locator('#error span').evaluate((span) => ({
    text: span.textContent, lang: span.lang, dir: span.dir, direction: getComputedStyle(span).direction,
  }));
  // Set apart as English, left to right: its full stop ends it on the
  // right, where English puts it, on this right-to-left page.
  assert.deepEqual(shown, { text: 'Something new went wrong.', lang: 'en', dir: 'ltr', direction: 'ltr' });
  assert.deepEqual(await violations(page), []);
  await screenshot(page, 'ar-unknown-code');
  await context.close();
});

test('a retry is said in one sentence of the language, by the error met', async () => {
  for (const tag of ['de', 'pl', 'ar']) {
    const { context, page } = await replaying(tag, () => '{}');
    await page.unroute('**/api/status?*');
    await page.route('**/api/status?*', (route) => route.fulfill({
      status: 504,
      headers: { 'lanyard-error': 'upstream_timeout' },
      contentType: 'application/json',
      body: JSON.stringify({ error: 'upstream_timeout', message: 'The verification service did not answer in time.' }),
    }));
    await startSession(page);
    const expected = variant(tag, 'retrying', 'upstream_timeout');
    await page.locator('#status').filter({ hasText: expected }).waitFor();
    assert.equal(await page.locator('#status').textContent(), expected, tag);
    await context.close();
  }
});

/** lanyard's own pages: a login it refuses, and a path with no page. */
const OWN_PAGES = [
  { name: 'refused', path: '/authorize?client_id=nobody&redirect_uri=https%3A%2F%2Fa.example%2F&scope=openid&response_type=code', status: 400, title: 'refused-title' },
  { name: 'missing', path: '/no-such-page', status: 404, title: 'not-found-title' },
];

test("lanyard's own pages speak each language, styled as the page under its CSP, and pass axe-core", async () => {
  const context = await newContext(shared.browser, DESKTOP);
  const page = await context.newPage();
  const blocked = [];
  page.on('console', (line) => {
    if (/Content Security Policy/i.test(line.text())) blocked.push(line.text());
  });
  for (const tag of TAGS) {
    for (const { name, path, status, title } of OWN_PAGES) {
      const response = await page.goto(`${VERIFIER_ORIGIN}${path}${path.includes('?') ? '&' : '?'}lang=${tag}`);
      assert.equal(response.status(), status, `${name} in ${tag}`);
      assert.equal(response.headers()['content-security-policy'], CONTENT_SECURITY_POLICY);
      assert.equal(response.headers()['content-language'], tag);
      const seen = await page.evaluate(() => ({
        lang: document.documentElement.lang,
        dir: document.documentElement.dir,
        h1: document.querySelector('h1').textContent,
        // The page's own stylesheet applied: its rules are there.
        styled: [...document.styleSheets].some((sheet) => sheet.href?.endsWith('/assets/verifier.css') && sheet.cssRules.length > 0),
      }));
      assert.deepEqual(seen, {
        lang: tag, dir: message(tag, 'language-direction'), h1: message(tag, title), styled: true,
      }, `${name} in ${tag}`);
      assert.equal(await page.title(), message(tag, title));
      assert.deepEqual(await violations(page), [], `${name} in ${tag}`);
      if (tag === 'ar' || tag === 'pl') await screenshot(page, `${tag}-${name}-page`);
    }
  }
  assert.deepEqual(blocked, []);
  await context.close();
});
