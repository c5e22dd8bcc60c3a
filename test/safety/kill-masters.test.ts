import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { now } from './support/history.js';
import { failures, runFor, spread, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { attempts, loopWorker, range, shuffled, tally } from './support/scenario-kit.js';

// Kill 2 of 5 masters mid-run: still safe and live. Kill a 3rd: typed quorum errors, never a
// false success. Bring the 3 back (empty, as a crash without persistence leaves them): live
// again once the restart quarantine (on, by default) has let them back in.

const TTL = 1_000;
const SHORT_MS = 5_000;
/** How long the majority stays down in each episode. */
const MAJORITY_DOWN_MS = 1_000;
/** Progress means this many successful acquisitions (any worker)... */
const PROGRESS = 5;
/** ...and then the workers keep going that long under the same conditions. */
const DWELL_MS = 500;

const fixture = scenarioFixture();

it('stays safe and live with 2 of 5 masters down, fails typed with 3 down, and recovers', async () => {
  const masters = fixture.masters();
  const scenario = fixture.start({
    id: 'kill-masters',
    title: 'Kill 2 of 5 masters, then a 3rd; bring them back empty',
    expected: 'safe',
    method:
      '3 processes x 2 workers loop on one resource (ttl 1 s, quarantine on). Each episode: SIGKILL 2 random masters, ' +
      `then a 3rd for ${MAJORITY_DOWN_MS / 1000} s, then restart all 3 without their data (default fences: counter + time floor).`,
  });
  // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
  scenario.forgeWakeups(masters.urls());
  await Promise.all(range(3).map((p) => scenario.spawn(loopWorker(`w${p}`, masters.urls(), { resources: ['kill'], ttlMs: [TTL] }))));

  const progress = async (since: bigint, timeoutMs: number) => {
    const live = await scenario.until(() => scenario.holdsSince(since) >= PROGRESS, timeoutMs);
    await sleep(DWELL_MS);
    return live;
  };
  const episodes = { run: 0, liveBefore: 0, liveTwoDown: 0, liveAgain: 0 };
  const majorityDown: [bigint, bigint][] = [];
  /** From the 3 masters being back to the first lock: the quarantine at work. */
  const recoveries: number[] = [];
  const endAt = performance.now() + runFor(SHORT_MS);
  do {
    episodes.run++;
    // Before the first episode this also waits for the fresh fleet to age past the quarantine.
    if (await progress(now(), 10_000)) episodes.liveBefore++;

    const [a, b, c] = shuffled(range(5));
    await Promise.all([masters.kill(a!), masters.kill(b!)]);
    scenario.fault(`kill master ${a}`);
    scenario.fault(`kill master ${b}`);
    if (await progress(now(), 10_000)) episodes.liveTwoDown++;

    await masters.kill(c!);
    scenario.fault(`kill master ${c} (a majority is down)`);
    const downFrom = now();
    await sleep(MAJORITY_DOWN_MS); // the scenario itself: how long the outage lasts
    const downUntil = now();
    majorityDown.push([downFrom, downUntil]);

    await Promise.all([a!, b!, c!].map((i) => masters.start(i)));
    for (const i of [a, b, c]) scenario.fault(`restart master ${i} empty`);
    // Quarantine keeps the empty masters out for a ttl: allow for that.
    const backAt = now();
    if (await progress(backAt, TTL * 3 + 10_000)) episodes.liveAgain++;
    const firstHold = scenario.firstHoldAfter(backAt);
    if (firstHold !== undefined) recoveries.push(firstHold);
  } while (performance.now() < endAt);

  await scenario.stopWorkers(); // every operation has ended: the history is complete
  // With 3 of 5 down, no acquire that began during the outage may succeed before it ends, and
  // every one that failed must say why in the quorum error's terms.
  const events = scenario.history.events();
  const during = attempts(events).filter(({ invoke }) => majorityDown.some(([from, until]) => invoke.t >= from && invoke.t <= until));
  const inside = (t: bigint) => majorityDown.some(([from, until]) => t >= from && t <= until);
  // A lock handed over within a process keeps the token (and validity) of its holder's lock: one
  // granted by the masters before the outage, which the checker judges like any other.
  const firstHeld = new Map<string, bigint>();
  for (const e of events) if (e.op === 'acquire' && e.phase === 'ok' && e.token && !firstHeld.has(e.token)) firstHeld.set(e.token, e.t);
  const grantedBefore = (invoke: bigint, token: string | undefined) => token !== undefined && firstHeld.get(token)! < invoke;
  const falseSuccesses = during.filter(({ invoke, end }) => end?.phase === 'ok' && inside(end.t) && !grantedBefore(invoke.t, end.token));
  const handedOver = during.filter(({ invoke, end }) => end?.phase === 'ok' && inside(end.t) && grantedBefore(invoke.t, end.token));
  const failed = during.filter(({ end }) => end?.phase === 'fail' && inside(end.t));
  const untyped = failed.filter(({ end }) => end!.code !== 'QUORUM_UNREACHABLE' && end!.code !== 'ACQUIRE_ABORTED');

  scenario.expect(`live before the faults (${episodes.liveBefore}/${episodes.run} episodes)`, episodes.liveBefore === episodes.run);
  scenario.expect(`live with 2 of 5 down (${episodes.liveTwoDown}/${episodes.run} episodes)`, episodes.liveTwoDown === episodes.run);
  scenario.expect(
    'no lock was granted while 3 of 5 were down',
    falseSuccesses.length === 0,
    `${falseSuccesses.length} was; ${handedOver.length} held before the outage handed over within a process`,
  );
  scenario.expect(
    `acquires during the outage failed with QuorumUnreachableError (${failed.length} failures)`,
    failed.length > 0 && untyped.length === 0,
    `codes: ${tally(failed.map(({ end }) => end!.code ?? '?'))}; first other: ${untyped[0]?.end?.error ?? '-'}`,
  );
  scenario.expect(
    `live again once the 3 are back (${episodes.liveAgain}/${episodes.run} episodes)`,
    episodes.liveAgain === episodes.run,
    `first lock after the restart, with the empty masters in quarantine for a ttl (${TTL} ms): ${spread(recoveries)}`,
  );

  const result = await scenario.finish();
  expect(failures(result)).toBe('');
}, timeoutFor(SHORT_MS));
