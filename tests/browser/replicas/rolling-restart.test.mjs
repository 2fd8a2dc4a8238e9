// The page behind a load balancer over replicas, through a rolling
// restart (tests/it/verifier_replicas.rs starts the replicas and haproxy, and
// restarts every replica, one after the other, when asked): a person
// starts, opens their wallet, and while they are there every replica is
// restarted; polls then reach the restarted replicas, the wallet presents,
// and the page ends with the claims. Not one of its polls was answered 404,
// which the page takes for "no replica knows this session".
//
// Not in tests/browser/ itself: tests/it/browser.rs runs every *.test.mjs
// there against the demo, which has no replicas to restart.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  DESKTOP, launch, newContext, openVerifier, openWallet, presentAndSeeVerified, screenshot, startSession,
} from '../support.mjs';

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run this test with \`cargo test --test verifier_replicas\`, which starts the replicas and sets it`);
  }
  return value;
}

/** Where to ask the Rust test to restart every replica: `POST {CONTROL_URL}/restart`. */
const CONTROL_URL = required('BROWSER_TEST_CONTROL_URL');
/** The balancer's names for the replicas, e.g. `replica0,replica1`. */
const REPLICAS = required('BROWSER_TEST_REPLICAS').split(',');
/** The header the balancer adds naming the replica that answered (tests/it/support/replicas.rs). */
const SERVED_BY = 'x-lanyard-replica';

const isStatus = (response) => new URL(response.url()).pathname === '/api/status';

let browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

test('the page ends with the claims though every replica restarted while the person was in the wallet', async () => {
  const context = await newContext(browser, DESKTOP);
  const polls = [];
  const page = await openVerifier(context, (tab) => {
    tab.on('response', (response) => {
      if (isStatus(response)) {
        polls.push({ status: response.status(), servedBy: response.headers()[SERVED_BY] });
      }
    });
  });

  await startSession(page);
  await page.waitForResponse(isStatus);
  const wallet = await openWallet(context, page, '#same-device-link');

  const restarted = await fetch(`${CONTROL_URL}/restart`, { method: 'POST' });
  assert.equal(restarted.status, 200, 'the replicas restarted (the Rust test says why not)');
  // The page keeps polling the same session; wait until the restarted
  // replicas have each answered a poll of it.
  const since = polls.length;
  const answeredBy = () => new Set(polls.slice(since).map((poll) => poll.servedBy));
  while (!REPLICAS.every((name) => answeredBy().has(name))) {
    await page.waitForResponse(isStatus);
  }

  await presentAndSeeVerified(wallet, page);
  await screenshot(page, 'replicas-rolling-restart-verified');

  const summary = polls.map((poll) => `${poll.status} from ${poll.servedBy}`).join(', ');
  assert.deepEqual(polls.filter((poll) => poll.status === 404), [], `a poll answered 404: ${summary}`);
  assert.ok(polls.length > since, `no poll after the restarts: ${summary}`);
  console.log(`polls: ${summary}`);
  await context.close();
});
