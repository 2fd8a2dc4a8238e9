// A single-page app built on oidc-client-ts (a public client: PKCE, no
// secret), signing a person in through lanyard's provider from the
// browser alone, in headless Chromium with the mock wallet.
// tests/it/oidc_browser_app.rs runs it:
//
//   1. it serves the app (spa/) on two loopback origins, the app's own
//      and another, and reports `{"event":"listening",…}` with the app's
//      redirect URI and both origins; the Rust test registers the redirect
//      URI alone, starts lanyard and writes the issuer URL on stdin;
//   2. Chromium opens the app, presses its sign-in button, and the person
//      presents in the mock wallet from lanyard's page;
//   3. with OIDC_SPA_FOREIGN_ORIGIN=1 the redirect back is held: the
//      code and the app's stored login state are carried to the same app
//      on the other origin, in a browser of its own, which tries to
//      redeem the code; then the held redirect goes on;
//   4. back at its redirect URI the app redeems the code and calls
//      userinfo, and the script reports `{"event":"signed_in",…}` with
//      what the app showed, every token and userinfo request the
//      browsers made with lanyard's answer, and the other origin's
//      attempt.
//
// Anything else ends with `{"event":"failed",…}` and exit code 1.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { STEP_TIMEOUT_MS, launch, readLine, report, required, run, trace, verifyWithWallet } from './browser.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const FILES = {
  '/': ['text/html; charset=utf-8', join(here, 'spa', 'index.html')],
  '/callback': ['text/html; charset=utf-8', join(here, 'spa', 'index.html')],
  '/app.js': ['text/javascript', join(here, 'spa', 'app.js')],
  '/oidc-client-ts.js': ['text/javascript', join(here, 'node_modules', 'oidc-client-ts', 'dist', 'browser', 'oidc-client-ts.js')],
};

run(async () => {
  const clientId = required('OIDC_CLIENT_ID');
  const foreignAttempt = process.env.OIDC_SPA_FOREIGN_ORIGIN === '1';
  const settings = {};
  const own = await serve(settings);
  const other = await serve(settings);
  const redirectUri = `${own}/callback`;
  report('listening', { redirect_uri: redirectUri, origin: own, other_origin: other });
  const issuer = await readLine(process.stdin);
  Object.assign(settings, { issuer, client_id: clientId, redirect_uri: redirectUri });

  const { browser, context } = await launch();
  const network = [];
  // Every token and userinfo request a page made, with lanyard's answer
  // or, when the browser kept the answer from the page, why. Chromium
  // shows playwright no CORS preflight.
  const lanyards = (request) => [`${issuer}/token`, `${issuer}/userinfo`].includes(request.url());
  const watch = (page, label) => {
    trace(page, label);
    page.on('response', async (response) => {
      if (lanyards(response.request())) {
        const headers = await response.allHeaders();
        network.push({
          browser: label,
          method: response.request().method(),
          url: response.url(),
          origin: await response.request().headerValue('origin'),
          status: response.status(),
          allow_origin: headers['access-control-allow-origin'] ?? null,
        });
      }
    });
    page.on('requestfailed', async (request) => {
      if (lanyards(request)) {
        network.push({
          browser: label,
          method: request.method(),
          url: request.url(),
          origin: await request.headerValue('origin'),
          failed: request.failure()?.errorText ?? 'failed',
        });
      }
    });
  };
  const page = await context.newPage();
  watch(page, 'app');
  const back = (url) => url.href.startsWith(`${redirectUri}?`);
  let held;
  if (foreignAttempt) {
    await page.route(back, (route) => {
      held = route.request().url();
      return route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>Held</title><p id="held">Held.</p>' });
    });
  }
  await page.goto(`${own}/`);
  await page.locator('#sign-in:enabled').click();
  const person = await verifyWithWallet(page, 'present');
  let foreign;
  if (foreignAttempt) {
    await page.locator('#held').waitFor();
    foreign = await fromTheOtherOrigin(browser, watch, page, held, other);
    await page.unroute(back);
    await page.goto(held);
  }
  const shown = page.locator('#result:visible, #error:visible').first();
  await shown.waitFor();
  const result = await page.locator('#result').innerText();
  const error = await page.locator('#error').innerText();
  await browser.close();
  report('signed_in', {
    ...person,
    callback: held ?? page.url(),
    result: result ? JSON.parse(result) : null,
    error: error || null,
    network,
    foreign,
  });
});

/**
 * The app on `other`, in a browser of its own, given the code the
 * redirect `held` carries and the login state the app stored in `page`:
 * its callback tries to redeem the code. Returns what it showed.
 */
async function fromTheOtherOrigin(browser, watch, page, held, other) {
  const key = `oidc.${new URL(held).searchParams.get('state')}`;
  const stored = await page.evaluate((k) => localStorage.getItem(k), key);
  if (!stored) {
    throw new Error(`the app stored no ${key}`);
  }
  const context = await browser.newContext();
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  const foreign = await context.newPage();
  watch(foreign, 'other origin');
  await foreign.goto(`${other}/`);
  await foreign.evaluate(([k, v]) => localStorage.setItem(k, v), [key, stored]);
  await foreign.goto(`${other}/callback${new URL(held).search}`);
  const shown = foreign.locator('#result:visible, #error:visible').first();
  await shown.waitFor();
  const outcome = {
    result: await foreign.locator('#result').innerText() || null,
    error: await foreign.locator('#error').innerText() || null,
  };
  await context.close();
  return outcome;
}

/**
 * The app on a free loopback port, `settings` (filled in once the issuer
 * is known) as its /config.json; its origin.
 */
async function serve(settings) {
  const server = createServer((request, response) => {
    const path = new URL(request.url, 'http://app').pathname;
    if (path === '/config.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(settings));
      return;
    }
    const file = FILES[path];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': file[0], 'cache-control': 'no-store' }).end(readFileSync(file[1]));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  // The browser is closed before the script exits; the servers go with it.
  server.unref();
  return `http://127.0.0.1:${server.address().port}`;
}
