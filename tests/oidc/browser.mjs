// What the relying parties' scripts share: headless Chromium (Debian's;
// playwright-core brings none), the person's part on lanyard's page and
// in the mock wallet, the one-line JSON reports the Rust test reads
// (tests/it/oidc_interop.rs), and openid-client's authorization request
// with PKCE, state and nonce.

import * as client from 'openid-client';
import { chromium } from 'playwright-core';

/** Long enough for the page's polling (every 1 to 5 s) to see the wallet's answer. */
export const STEP_TIMEOUT_MS = 20_000;

/** An environment variable the Rust test sets. */
export function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: tests/it/oidc_interop.rs runs this script and sets it`);
  }
  return value;
}

/** One JSON line on stdout, for the Rust test. */
export function report(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

/** Debian's Chromium, headless, with no network of its own. */
export async function launch() {
  const browser = await chromium.launch({
    executablePath: process.env.OIDC_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  return { browser, context };
}

/**
 * Writes every top-level navigation and every answer of 400 or more that
 * `page` sees to stderr, so a failure shows what the browser went through.
 */
export function trace(page, label) {
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) {
      console.error(`[${label}] at ${frame.url()}`);
    }
  });
  page.on('response', (response) => {
    if (response.status() >= 400) {
      console.error(`[${label}] ${response.request().method()} ${response.url()} answered ${response.status()}`);
    }
  });
  page.on('console', (message) => console.error(`[${label}] console.${message.type()}: ${message.text()}`));
}

/**
 * The person's part, from lanyard's authorization page in `page`: presses
 * "Verify with my wallet", follows the wallet link (a web wallet opens in
 * a new tab) and presses `action` ("present" or "decline") in the mock
 * wallet. Returns what the page said of the relying party before the
 * start, for the test to check.
 */
export async function verifyWithWallet(page, action) {
  const context = page.context();
  const start = page.locator('#start');
  await start.waitFor({ state: 'visible' });
  const before = await page.locator('body').innerText();
  await start.click();
  // A desktop gets the QR code and "My wallet is on this device"; a phone
  // gets the wallet button. Either opens the wallet.
  const link = page.locator('#wallet-button:visible, #same-device-link:visible').first();
  await link.waitFor({ state: 'visible' });
  const href = await link.getAttribute('href');
  const [wallet] = await Promise.all([context.waitForEvent('page'), link.click()]);
  trace(wallet, 'wallet');
  await wallet.waitForLoadState();
  await wallet.locator(`#${action}`).click();
  await wallet.locator('#outcome').waitFor();
  return { page_text: before, wallet_link: href, wallet_said: await wallet.locator('#outcome').innerText() };
}

/** The first line of `stream`, without its newline. */
export async function readLine(stream) {
  let text = '';
  for await (const chunk of stream) {
    text += chunk;
    const end = text.indexOf('\n');
    if (end >= 0) {
      return text.slice(0, end);
    }
  }
  throw new Error('stdin closed before a line arrived');
}

/** Runs `main`, reporting a failure as one JSON line and exit code 1. */
export function run(main) {
  main().then(
    () => process.exit(0),
    (err) => {
      report('failed', {
        error: String(err?.stack ?? err),
        name: err?.name,
        code: err?.code,
        // openid-client's ResponseBodyError: what the server answered.
        status: err?.status,
        oauth_error: err?.error,
        oauth_error_description: err?.error_description,
        cause: describeCause(err?.cause),
      });
      process.exit(1);
    },
  );
}

function describeCause(cause) {
  if (cause === undefined) {
    return undefined;
  }
  if (cause instanceof URLSearchParams) {
    return Object.fromEntries(cause);
  }
  if (cause instanceof Response) {
    return { status: cause.status, url: cause.url };
  }
  try {
    return JSON.parse(JSON.stringify(cause));
  } catch {
    return String(cause);
  }
}

/** An authorization URL for `redirectUri`, with its PKCE verifier, state and nonce. */
export async function authorizationRequest(config, redirectUri) {
  const codeVerifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid',
    code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  return { url, codeVerifier, state, nonce };
}
