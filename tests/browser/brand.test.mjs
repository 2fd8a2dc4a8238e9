// The page in the relying party's brand (docs/verifier.md "Branding"), with the
// example brand file shipped in config/: its logo named by its name, its
// accent on the buttons, why it asks and its claims' labels in the page's
// language, all from lanyard's own origin under the page's CSP, and
// nothing axe-core finds against WCAG 2.1 A and AA. tests/it/browser.rs
// starts a second demo with the brand file for these.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';

import {
  DESKTOP, PHONE, claimsShown, launch, message, newContext, openVerifier, screenshot, violations,
} from './support.mjs';

const BRANDED_URL = process.env.BROWSER_TEST_BRANDED_URL;
const BRANDED_SHOP_URL = process.env.BROWSER_TEST_BRANDED_SHOP_URL;
const BRAND_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'config', 'brand.example.toml');

/** `key` of the brand file's table `table` (`purpose`, `claims.given_name`). */
function brandText(table, key) {
  let current = null;
  for (const line of readFileSync(BRAND_FILE, 'utf8').split('\n')) {
    const header = /^\[(.+)\]\s*$/.exec(line);
    if (header) current = header[1];
    const entry = /^(\S+) = "(.*)"$/.exec(line);
    if (current === table && entry && entry[1] === key) return entry[2];
  }
  throw new Error(`no ${table}.${key} in ${BRAND_FILE}`);
}

/** A session as /api/start answers one, for the page to show. */
const SESSION = {
  transaction_id: 'replayed',
  request_uri: 'openid4vp://?request_uri=https%3A%2F%2Fexample.invalid%2Fr',
  wallet_url: 'https://wallet.example.invalid/',
  qr_svg: '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>',
  expires_in: 300,
};
const VERIFIED = JSON.stringify({
  status: 'verified',
  claims: { given_name: 'Erika', birth_date: '1984-01-26', age_over_18: true, nationality: 'DE' },
});

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

/** The branded page in `tag`, its start and polls answered here. */
async function branded(screen, tag) {
  const context = await newContext(browser, screen);
  const origin = new URL(BRANDED_URL).origin;
  const problems = [];
  const page = await openVerifier(context, (tab) => {
    tab.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
    tab.route(`${origin}/api/start`, (route) =>
      route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(SESSION) }));
    tab.route(`${origin}/api/status?*`, (route) =>
      route.fulfill({ status: 200, contentType: 'application/json', body: VERIFIED }));
  }, `${BRANDED_URL}?lang=${tag}`);
  await page.evaluate(() => {
    window.violationsSeen = [];
    document.addEventListener('securitypolicyviolation', (e) => window.violationsSeen.push(e.violatedDirective));
  });
  return { context, page, problems };
}

for (const tag of ['en', 'de', 'ar']) {
  test(`in ${tag}, the page shows who asks and why, in its brand, and claims under its labels`, { skip: !BRANDED_URL }, async () => {
    const { context, page, problems } = await branded(DESKTOP, tag);
    const logo = page.locator('header .brand img');
    assert.equal(await logo.getAttribute('alt'), brandText(null, 'name'));
    assert.equal(await logo.evaluate((img) => img.complete && img.naturalWidth > 0), true, 'the logo loads');
    assert.equal(await page.locator('.purpose p').textContent(), brandText('purpose', tag));
    assert.equal(await page.locator('#start').evaluate((b) => getComputedStyle(b).backgroundColor),
      'rgb(31, 78, 140)', 'the brand accent');
    assert.deepEqual(await violations(page), [], 'at the start');
    await screenshot(page, `brand-${tag}-start`);

    await page.click('#start');
    await page.locator('#result').waitFor({ state: 'visible' });
    const shown = await claimsShown(page);
    assert.equal(shown[brandText('claims.given_name', tag)], 'Erika');
    assert.ok(brandText('claims.age_over_18', tag) in shown, JSON.stringify(shown));
    // A claim the brand does not label: lanyard's own label for it.
    assert.ok(message(tag, 'claim-nationality') in shown, JSON.stringify(shown));
    assert.deepEqual(await violations(page), [], 'with the claims');
    assert.deepEqual(await page.evaluate(() => window.violationsSeen), [], 'no CSP violation');
    assert.deepEqual(problems, []);
    await screenshot(page, `brand-${tag}-claims`);
    await context.close();
  });
}

test('on a phone, the branded header fits', { skip: !BRANDED_URL }, async () => {
  const { context, page } = await branded(PHONE, 'de');
  assert.equal(await page.evaluate(() => document.scrollingElement.scrollWidth > window.innerWidth), false);
  assert.deepEqual(await violations(page), []);
  await screenshot(page, 'brand-de-phone');
  await context.close();
});

test("a login page in the brand names the client as who asks", { skip: !BRANDED_SHOP_URL }, async () => {
  const context = await newContext(browser, DESKTOP);
  const shop = await context.newPage();
  await shop.goto(BRANDED_SHOP_URL);
  const verifier = new URL(BRANDED_URL).origin;
  await Promise.all([shop.waitForURL((url) => url.origin === verifier), shop.click('#login')]);
  assert.match(await shop.locator('#asker').textContent(), /^Demo shop /);
  assert.equal(await shop.locator('header .brand img').getAttribute('alt'), brandText(null, 'name'));
  assert.deepEqual(await violations(shop), []);
  await screenshot(shop, 'brand-login');
  await context.close();
});

// A client's own brand in the clients file (docs/oidc.md, "A brand per
// client"), on its logins' page: tests/it/browser.rs starts a verifier
// whose client `shop` has one and whose client `plain` has none, beside
// the example brand file, and names both clients' authorization requests.
const CLIENT_BRANDED_URL = process.env.BROWSER_TEST_CLIENT_BRANDED_URL;
const CLIENT_PLAIN_URL = process.env.BROWSER_TEST_CLIENT_PLAIN_URL;
const CLIENT_BRAND = JSON.parse(process.env.BROWSER_TEST_CLIENT_BRAND || '{}');

/** The login page at `url`, with what it broke recorded from its first byte. */
async function loginPage(url) {
  const context = await newContext(browser, DESKTOP);
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.url()} answered ${r.status()}`); });
  await page.addInitScript(() => {
    window.violationsSeen = [];
    document.addEventListener('securitypolicyviolation', (e) => window.violationsSeen.push(e.violatedDirective));
  });
  const response = await page.goto(url);
  assert.equal(response.status(), 200, await response.text());
  return { context, page, problems };
}

for (const tag of ['en', 'de']) {
  test(`in ${tag}, a client's login page is in the client's own brand`, { skip: !CLIENT_BRANDED_URL }, async () => {
    const { context, page, problems } = await loginPage(`${CLIENT_BRANDED_URL}&ui_locales=${tag}`);
    assert.equal(await page.locator('html').getAttribute('lang'), tag);
    const logo = page.locator('header .brand img');
    assert.equal(await logo.getAttribute('alt'), CLIENT_BRAND.name);
    assert.match(await logo.getAttribute('src'), /\/assets\/brand\/logo-[0-9a-f]{32}$/);
    assert.equal(await logo.evaluate((img) => img.complete && img.naturalWidth > 0), true, 'the logo loads');
    assert.equal(await page.locator('#start').evaluate((b) => getComputedStyle(b).backgroundColor),
      CLIENT_BRAND.accent, "the client's accent");
    assert.equal(await page.locator('.purpose p').textContent(), CLIENT_BRAND.purpose[tag]);
    const labels = JSON.parse(await page.locator('#labels').textContent());
    assert.equal(labels.age_over_18, CLIENT_BRAND.label[tag], "the client's label wins");
    assert.ok(!(await page.locator('body').innerText()).includes(brandText(null, 'name')), "not the deployment's brand");
    assert.deepEqual(await violations(page), [], 'axe-core on the branded login page');
    assert.deepEqual(await page.evaluate(() => window.violationsSeen), [], 'no CSP violation');
    assert.deepEqual(problems, []);
    await screenshot(page, `client-brand-${tag}`);
    await context.close();
  });
}

test("a client without a brand of its own gets the deployment's", { skip: !CLIENT_PLAIN_URL }, async () => {
  const { context, page, problems } = await loginPage(CLIENT_PLAIN_URL);
  const logo = page.locator('header .brand img');
  assert.equal(await logo.getAttribute('alt'), brandText(null, 'name'));
  assert.match(await logo.getAttribute('src'), /\/assets\/logo$/);
  assert.equal(await logo.evaluate((img) => img.complete && img.naturalWidth > 0), true, 'the logo loads');
  assert.equal(await page.locator('.purpose p').textContent(), brandText('purpose', 'en'));
  assert.deepEqual(await violations(page), []);
  assert.deepEqual(await page.evaluate(() => window.violationsSeen), [], 'no CSP violation');
  assert.deepEqual(problems, []);
  await context.close();
});
