// What the browser tests share: where the verifier is (tests/it/browser.rs
// starts the demo and says so in the environment), headless Chromium, the
// two screens the page is tested on, the steps every flow takes, and
// axe-core's reading of the page against WCAG 2.1.
//
// tests/it/browser.rs lets one client start 30 sessions a minute, 30 of
// them at once (LANYARD_VERIFIER_CLIENT_STARTS), and every test here comes
// from 127.0.0.1: together the tests start about 16, over the minute or so
// they take. A file that needs many sessions but not the server's answers
// (claims.test.mjs, languages.test.mjs) starts one and replays it
// (`replayStart`).

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';

import jsQR from 'jsqr';
import { PNG } from 'pngjs';
import { chromium, devices } from 'playwright-core';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests with \`cargo test --test browser\`, which starts the verifier and sets it`);
  }
  return value;
}

/** The verifier page, e.g. `http://127.0.0.1:41234/`. */
export const VERIFIER_URL = required('BROWSER_TEST_VERIFIER_URL');
export const VERIFIER_ORIGIN = new URL(VERIFIER_URL).origin;
/** The Content-Security-Policy lanyard declares for the page. */
export const CONTENT_SECURITY_POLICY = required('BROWSER_TEST_CSP');
/** The page's locale files, where tests read the words they expect. */
export const LOCALES = join(repo, 'src', 'verifier', 'page', 'locales');

/** Message `id` of `tag`.ftl, written on one line. */
export function message(tag, id) {
  const text = readFileSync(join(LOCALES, `${tag}.ftl`), 'utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${id} = `));
  assert.ok(line, `${tag}.ftl has no one-line message ${id}`);
  return line.slice(id.length + 3).trim();
}

/** The `[key]` variant of message `id` of `tag`.ftl, one selecting on a value. */
export function variant(tag, id, key) {
  const text = readFileSync(join(LOCALES, `${tag}.ftl`), 'utf8');
  const lines = text.split('\n');
  const from = lines.findIndex((l) => l.startsWith(`${id} = `));
  assert.ok(from >= 0, `${tag}.ftl has no message ${id}`);
  for (const line of lines.slice(from + 1)) {
    if (line.trim() === '}') break;
    const match = /^\s*\*?\[([\w-]+)\] (.*)$/.exec(line);
    if (match && match[1] === key) return match[2].trim();
  }
  throw new Error(`${tag}.ftl: ${id} has no [${key}] variant`);
}

const CHROMIUM = process.env.BROWSER_TEST_CHROMIUM || '/usr/bin/chromium';
const SCREENSHOTS = process.env.BROWSER_TEST_SCREENSHOTS || join(repo, 'target', 'browser-screenshots');

/** A laptop's window. */
export const DESKTOP = { viewport: { width: 1280, height: 800 } };
/** A phone: its size, pixel ratio, touch and mobile user agent. */
export const PHONE = devices['Pixel 7'];

/** Long enough for the page's polling (every 1 to 5 s) to see an outcome. */
const STEP_TIMEOUT_MS = 15_000;

/** Debian's Chromium, headless, with no network of its own. */
export function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** A fresh browser context (its own cookies) with `options`. */
export async function newContext(browser, options) {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  return context;
}

/** The verifier page in the language `tag` chose with the page's switch. */
export function inLanguage(tag) {
  const url = new URL(VERIFIER_URL);
  url.searchParams.set('lang', tag);
  return url.href;
}

/**
 * The verifier page (at `url`, one of its languages say), loaded in a new
 * tab of `context`; `prepare` gets the tab before it loads anything (to
 * listen to its requests, say).
 */
export async function openVerifier(context, prepare = () => {}, url = VERIFIER_URL) {
  const page = await context.newPage();
  prepare(page);
  const response = await page.goto(url);
  assert.equal(response.status(), 200, `GET ${url}`);
  return page;
}

const isStart = (response) =>
  response.url() === new URL('/api/start', VERIFIER_URL).href && response.request().method() === 'POST';

/**
 * Starts a session with `activate` (a click on #start unless given) and
 * returns what /api/start answered, once the page shows it.
 */
export async function startSession(page, activate = () => page.click('#start')) {
  const [response] = await Promise.all([page.waitForResponse(isStart), activate()]);
  assert.equal(response.status(), 200, `/api/start answered ${response.status()}: ${await response.text()}`);
  const session = await response.json();
  await page.locator('#present').waitFor({ state: 'visible' });
  return session;
}

/**
 * Answers every /api/start of `page` with `session`, what one real start
 * answered, so a test of how the page shows an outcome spends none of the
 * start limit. Only that tab's starts are answered so.
 */
export function replayStart(page, session) {
  return page.route(new URL('/api/start', VERIFIER_URL).href, (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(session) }));
}

/**
 * One real start in a new tab of `browser`: what /api/start answered, for
 * `replaying` to replay wherever a test needs a session but not the
 * server's answers.
 */
export async function oneStart(browser) {
  const context = await newContext(browser, DESKTOP);
  const session = await startSession(await openVerifier(context));
  await context.close();
  return session;
}

/**
 * Presses "Present" in the mock wallet's tab `wallet`, and checks that
 * `page` then shows the mock's claims in English, verified, with no error.
 */
export async function presentAndSeeVerified(wallet, page) {
  await wallet.click('#present');
  assert.match(await wallet.locator('#outcome').textContent(), /^Presented\./);
  await page.locator('#result').waitFor({ state: 'visible' });
  assert.deepEqual(await claimsShown(page), {
    'Given name': 'Erika',
    'Family name': 'Mustermann',
    // A date in the page's language, on its own day in every time zone.
    'Birth date': 'January 26, 1984',
    'At least 18 years old': 'Yes',
  });
  assert.equal(await page.locator('#status').textContent(), 'Verified. Your wallet presented the claims below.');
  assert.equal(await page.locator('#error').isVisible(), false);
}

/**
 * Headless Chromium for a file's tests and one real start in it, made
 * before the tests run and closed after them: `shared.browser` and
 * `shared.session` are set once they run.
 */
export function sharedStart() {
  const shared = {};
  before(async () => {
    shared.browser = await launch();
    shared.session = await oneStart(shared.browser);
  });
  after(() => shared.browser?.close());
  return shared;
}

/**
 * A `device` tab of `browser` in language `tag` whose starts replay
 * `session` and whose polls answer `poll()`.
 */
export async function replaying(browser, session, device, tag, poll) {
  const context = await newContext(browser, device);
  const page = await openVerifier(context, () => {}, inLanguage(tag));
  await replayStart(page, session);
  await answerStatus(page, poll);
  return { context, page };
}

/**
 * Answers every poll of `page` with `body()`, a JSON text as written: a
 * number beyond a double, or an escaped control character, reaches the
 * page as the service's JSON carries it. 200 with a final status is
 * lanyard's own answer; no `lanyard-error` header is needed.
 */
export function answerStatus(page, body) {
  return page.route('**/api/status?*', (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: body() }));
}

/** The wallet tab that clicking `link` opens. */
export async function openWallet(context, page, link) {
  const [wallet] = await Promise.all([context.waitForEvent('page'), page.click(link)]);
  await wallet.waitForLoadState();
  return wallet;
}

/** The text of each top-level dt, with its dd's, in #claims. */
export function claimsShown(page) {
  return page.locator('#claims').evaluate((list) => {
    const claims = {};
    for (const dt of list.querySelectorAll(':scope > dt')) {
      claims[dt.textContent] = dt.nextElementSibling.textContent;
    }
    return claims;
  });
}

/** What the QR code in #qr encodes, read from a screenshot of it. */
export async function decodeQr(page) {
  const png = PNG.sync.read(await page.locator('#qr').screenshot());
  const pixels = new Uint8ClampedArray(png.data.buffer, png.data.byteOffset, png.data.length);
  const code = jsQR(pixels, png.width, png.height);
  assert.ok(code, `no QR code found in a ${png.width}x${png.height} screenshot of #qr`);
  return code.data;
}

/** Saves the page as `name`.png for people to look at. */
export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const WCAG_21_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

/**
 * What axe-core finds against WCAG 2.1 A and AA, one line per rule broken.
 * Evaluated through the browser's debugging protocol, which the page's
 * Content-Security-Policy does not govern, so the page runs under its own.
 */
export async function violations(page) {
  await page.evaluate(AXE);
  return page.evaluate(async (tags) => {
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: tags } });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, WCAG_21_AA);
}

/** Whether the page scrolls sideways: it should not, on any screen. */
export function scrollsSideways(page) {
  return page.evaluate(() => document.scrollingElement.scrollWidth > window.innerWidth);
}
