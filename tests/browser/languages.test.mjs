// The page in each of its languages (docs/translations.md): chosen from
// the browser's Accept-Language or the page's switch, with <html lang> and
// dir following; every shipped language passing axe-core; the switch
// carrying a pending session on; and claims shown as words and dates of
// the page's language, on the date's own day in any time zone. The
// expected words come from the Fluent files themselves.
//
// Two real starts (see support.mjs on the start limit): one replayed for
// every state axe-core judges, and the session the switch carries on.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';

import {
  DESKTOP, LOCALES, PHONE, VERIFIER_URL, claimsShown, decodeQr, inLanguage, message, newContext,
  openVerifier, openWallet, replaying as replayingIn, sharedStart, screenshot, scrollsSideways, startSession,
  violations,
} from './support.mjs';

/** What the mock wallet presents, as a verified poll answers it. */
const VERIFIED = JSON.stringify({
  status: 'verified',
  claims: { given_name: 'Erika', birth_date: '1984-01-26', age_over_18: true },
});
const PENDING = JSON.stringify({ status: 'pending', expires_in: 300 });
const DECLINED = JSON.stringify({ status: 'declined' });

// One real start, replayed wherever a test needs a session but not the
// server's answers.
const shared = sharedStart();

/** `page`'s language as the browser sees it, and its h1. */
const shown = (page) => page.evaluate(() => ({
  lang: document.documentElement.lang,
  dir: document.documentElement.dir,
  h1: document.querySelector('h1').textContent,
}));

/** A `device` tab in language `tag` whose starts replay `session` and whose polls answer `poll()`. */
const replaying = (device, tag, poll) => replayingIn(shared.browser, shared.session, device, tag, poll);

for (const tag of ['en', 'de', 'ar']) {
  test(`in ${tag}, axe-core finds no WCAG 2.1 A or AA violation at the start, with the QR code, the wallet button, the claims, or a decline`, async () => {
    let answer = PENDING;
    const { context, page } = await replaying(DESKTOP, tag, () => answer);
    assert.equal((await shown(page)).lang, tag);
    assert.deepEqual(await violations(page), [], 'at the start');
    await screenshot(page, `${tag}-start`);

    await startSession(page);
    await page.locator('#qr svg').waitFor({ state: 'visible' });
    assert.deepEqual(await violations(page), [], 'with the QR code');
    await screenshot(page, `${tag}-qr`);

    answer = VERIFIED;
    await page.locator('#result').waitFor({ state: 'visible' });
    assert.deepEqual(await violations(page), [], 'with the claims');
    await screenshot(page, `${tag}-claims`);

    answer = DECLINED;
    await startSession(page, () => page.click('#restart'));
    await page.getByText(message(tag, 'declined')).waitFor();
    assert.deepEqual(await violations(page), [], 'after a decline');
    await screenshot(page, `${tag}-declined`);
    await context.close();

    const phone = await replaying(PHONE, tag, () => PENDING);
    await startSession(phone.page);
    await phone.page.locator('#wallet-button').waitFor({ state: 'visible' });
    assert.deepEqual(await violations(phone.page), [], 'with the wallet button');
    assert.equal(await scrollsSideways(phone.page), false, 'on a phone');
    await screenshot(phone.page, `${tag}-phone-wallet-button`);
    await phone.context.close();
  });
}

test("the browser's Accept-Language chooses the language, and <html lang> and dir follow it", async () => {
  const cases = [
    // What a browser set to German sends: de-DE, which lookup finds as de.
    { options: { locale: 'de-DE' }, lang: 'de', dir: 'ltr', h1: message('de', 'page-title') },
    { options: { locale: 'ar-EG' }, lang: 'ar', dir: 'rtl', h1: message('ar', 'page-title') },
    // No Japanese file: English, the page's own.
    { options: { locale: 'ja-JP' }, lang: 'en', dir: 'ltr', h1: message('en', 'page-title') },
    { options: { extraHTTPHeaders: { 'Accept-Language': 'ja' } }, lang: 'en', dir: 'ltr' },
    // The first language lanyard has, in the order the browser gives.
    { options: { extraHTTPHeaders: { 'Accept-Language': 'ja, de;q=0.8, en;q=0.5' } }, lang: 'de', dir: 'ltr' },
  ];
  for (const { options, lang, dir, h1 } of cases) {
    const context = await newContext(shared.browser, { ...DESKTOP, ...options });
    const page = await context.newPage();
    const response = await page.goto(VERIFIER_URL);
    const asked = JSON.stringify(options);
    assert.equal(response.headers()['content-language'], lang, asked);
    assert.match(response.headers().vary, /Accept-Language/i, asked);
    const seen = await shown(page);
    assert.deepEqual({ lang: seen.lang, dir: seen.dir }, { lang, dir }, asked);
    if (h1) assert.equal(seen.h1, h1, asked);
    assert.equal(await page.locator('nav.languages a[aria-current="true"]').getAttribute('hreflang'), lang, asked);
    await context.close();
  }
});

test('every language the switch lists opens in its own words and passes axe-core', async () => {
  const context = await newContext(shared.browser, DESKTOP);
  const page = await openVerifier(context);
  const listed = await page.locator('nav.languages a[hreflang]').evaluateAll((links) =>
    links.map((link) => link.getAttribute('hreflang')));
  // Every file is a language (docs/translations.md, "Adding a language").
  const files = readdirSync(LOCALES).filter((f) => f.endsWith('.ftl')).map((f) => f.slice(0, -4));
  assert.deepEqual([...listed].sort(), files.sort(), 'the switch lists every locale file');
  const english = (await shown(page)).h1;

  for (const tag of listed) {
    await page.goto(inLanguage(tag));
    const seen = await shown(page);
    assert.equal(seen.lang, tag);
    assert.equal(seen.dir, message(tag, 'language-direction'), tag);
    assert.equal(seen.h1, message(tag, 'page-title'), tag);
    if (tag !== 'en') assert.notEqual(seen.h1, english, `${tag}'s h1 is its own`);
    assert.equal(await page.title(), message(tag, 'page-title'), tag);
    assert.equal(await page.locator('#start').textContent(), message(tag, 'start'), tag);
    assert.equal(await page.locator('nav.languages a[aria-current="true"]').getAttribute('hreflang'), tag);
    assert.deepEqual(await violations(page), [], `${tag} at the start`);
  }
  await context.close();
});

test('the switch is a visible list of languages, each in its own name and language, on both screens', async () => {
  for (const [device, name] of [[DESKTOP, 'ar-switch'], [PHONE, 'ar-switch-phone']]) {
    const context = await newContext(shared.browser, device);
    const page = await openVerifier(context, () => {}, inLanguage('ar'));
    const nav = page.getByRole('navigation', { name: message('ar', 'language-switch') });
    assert.equal(await nav.isVisible(), true);
    const links = nav.getByRole('list').getByRole('listitem').getByRole('link');
    assert.ok(await links.count() >= 3);
    for (const link of await links.all()) {
      const tag = await link.getAttribute('hreflang');
      assert.equal(await link.isVisible(), true, tag);
      // A screen reader says each name in its own language.
      assert.equal(await link.getAttribute('lang'), tag);
      assert.equal(await link.textContent(), message(tag, 'language-name'));
      assert.equal(new URL(await link.getAttribute('href'), page.url()).searchParams.get('lang'), tag);
    }
    assert.equal(await scrollsSideways(page), false, 'the list wraps on a phone');
    await screenshot(page, name);
    await context.close();
  }
});

test('switching to German while a session is pending carries it on, and its claims show in German, on their own day west of Greenwich', async () => {
  // Midnight UTC is the evening before here: a date formatted in the
  // browser's own zone would show the 25th.
  const context = await newContext(shared.browser, { ...DESKTOP, timezoneId: 'America/Los_Angeles' });
  const page = await openVerifier(context);
  assert.equal(await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone), 'America/Los_Angeles');
  const started = await startSession(page);
  await page.locator('#qr svg').waitFor({ state: 'visible' });

  // A reload: the page in German, the same session, polled again, and
  // never started anew.
  const inGerman = () => new URL(page.url()).searchParams.get('lang') === 'de';
  const startsInGerman = [];
  page.on('request', (request) => {
    if (inGerman() && request.url().includes('/api/start')) startsInGerman.push(request.url());
  });
  const polled = page.waitForRequest((request) => inGerman() &&
    request.url().includes('/api/status?') &&
    new URL(request.url()).searchParams.get('transactionId') === started.transaction_id);
  await Promise.all([
    page.waitForURL((url) => url.searchParams.get('lang') === 'de'),
    page.getByRole('link', { name: 'Deutsch' }).click(),
  ]);
  assert.deepEqual(await shown(page), { lang: 'de', dir: 'ltr', h1: message('de', 'page-title') });
  await page.locator('#qr svg').waitFor({ state: 'visible' });
  assert.equal(await decodeQr(page), started.request_uri, 'the QR code names the same request');
  assert.equal(await page.locator('#start').isVisible(), false, 'no second start');
  assert.equal(await page.locator('#status').textContent(), message('de', 'waiting-desktop'));
  await polled;
  assert.deepEqual(startsInGerman, []);

  const wallet = await openWallet(context, page, '#same-device-link');
  assert.equal(wallet.url(), started.wallet_url);
  await wallet.click('#present');
  await page.locator('#result').waitFor({ state: 'visible' });
  assert.equal(await page.locator('#status').textContent(), message('de', 'verified'));
  const claims = await claimsShown(page);
  // Under lanyard's own German labels for the claims.
  assert.equal(claims[message('de', 'claim-birth_date')], '26. Januar 1984');
  assert.equal(claims['Mindestens 18 Jahre alt'], message('de', 'value-true'));
  assert.equal(claims['Mindestens 18 Jahre alt'], 'Ja');
  assert.equal(claims[message('de', 'claim-given_name')], 'Erika');
  await screenshot(page, 'de-verified-after-switch');
  await context.close();
});

test('in Arabic, booleans show as its words and a date as an Arabic date, on its own day', async () => {
  const claims = JSON.stringify({
    status: 'verified',
    claims: { given_name: 'Erika', birth_date: '1984-01-26', age_over_18: true, age_over_65: false },
  });
  const { context, page } = await replaying(DESKTOP, 'ar', () => claims);
  await startSession(page);
  await page.locator('#result').waitFor({ state: 'visible' });
  const shownClaims = await claimsShown(page);
  assert.equal(shownClaims['العمر 18 عامًا أو أكثر'], message('ar', 'value-true'));
  assert.equal(shownClaims['العمر 65 عامًا أو أكثر'], message('ar', 'value-false'));
  // ٢٦ يناير ١٩٨٤ or 26 يناير 1984: Chromium's Arabic digits vary with its
  // CLDR; the day, the month's Arabic name and no control mark do not.
  assert.match(shownClaims[message('ar', 'claim-birth_date')], /^(26|٢٦) يناير (1984|١٩٨٤)$/u);
  assert.equal(await page.locator('#claims .control').count(), 0, 'no mark for a character the date holds');
  await screenshot(page, 'ar-claims-words-and-date');
  await context.close();
});

test('in Arabic the claims mirror: each value sits against its name, nested lists are set in and numbered from the right', async () => {
  const nested = JSON.stringify({
    status: 'verified',
    claims: {
      given_name: 'Erika',
      city: 'القاهرة',
      address: { locality: 'Köln', postal_code: '51147' },
      nationalities: ['DE', 'مصر'],
    },
  });
  for (const [tag, start] of [['ar', 'right'], ['en', 'left']]) {
    const { context, page } = await replaying(DESKTOP, tag, () => nested);
    await startSession(page);
    await page.locator('#result').waitFor({ state: 'visible' });
    // Whatever a value's own direction (dir=auto: Erika reads left to
    // right, القاهرة right to left), it lines up on the page's start
    // side of its cell, next to its name, not across the column.
    const offsets = await page.locator('#claims').evaluate((list, side) => {
      const away = {};
      for (const cell of list.querySelectorAll(':scope > dt, :scope > dd.isolated')) {
        const range = document.createRange();
        range.selectNodeContents(cell);
        const text = range.getBoundingClientRect();
        const box = cell.getBoundingClientRect();
        away[cell.textContent] = Math.round(Math.abs(text[side] - box[side]));
      }
      return away;
    }, start);
    for (const [text, px] of Object.entries(offsets)) {
      assert.ok(px <= 1, `${tag}: "${text}" is ${px} px from its cell's ${start} edge`);
    }
    // The rule and the indent of a nested level are on the start side.
    const sides = await page.locator('#claims dl.claims, #claims ol.claim-list').evaluateAll((lists) =>
      lists.map((list) => {
        const style = getComputedStyle(list);
        return { rule: { left: style.borderLeftWidth, right: style.borderRightWidth },
          indented: { left: parseFloat(style.paddingLeft) > 0, right: parseFloat(style.paddingRight) > 0 } };
      }));
    assert.equal(sides.length, 2);
    const end = start === 'right' ? 'left' : 'right';
    for (const { rule, indented } of sides) {
      assert.deepEqual({ start: rule[start], end: rule[end] }, { start: '2px', end: '0px' }, `${tag}: the rule`);
      assert.deepEqual({ start: indented[start], end: indented[end] }, { start: true, end: false }, `${tag}: the indent`);
    }
    // A list item's number sits on the list's side, whatever the
    // item's text: the item takes the list's direction, and its text is
    // isolated inside it.
    const items = await page.locator('#claims ol.claim-list > li').evaluateAll((lis) => lis.map((li) => ({
      item: getComputedStyle(li).direction,
      list: getComputedStyle(li.parentElement).direction,
      text: getComputedStyle(li.querySelector('.isolated') || li).direction,
    })));
    assert.deepEqual(items.map(({ item, list }) => item === list), [true, true], `${tag}: ${JSON.stringify(items)}`);
    assert.deepEqual(items.map(({ text }) => text), ['ltr', 'rtl'], `${tag}: DE reads left to right, مصر right to left`);
    assert.equal(await scrollsSideways(page), false);
    if (tag === 'ar') await screenshot(page, 'ar-claims-nested');
    await context.close();
  }
});

test("in Arabic, the QR code toggle's text starts on the right", async () => {
  const { context, page } = await replaying(PHONE, 'ar', () => PENDING);
  await startSession(page);
  assert.match(await page.locator('#toggle-qr').evaluate((button) => getComputedStyle(button).textAlign), /^(start|right)$/);
  await context.close();
});
