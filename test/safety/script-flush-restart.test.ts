import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectMasters, disconnectAll, untilReady } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { now } from './support/history.js';
import { failures, runFor, SafetyRun, timeoutFor } from './support/safety-run.js';
import { attempts, expectSharing, KINDS, loopWorker, range, shuffled, tally } from './support/scenario-kit.js';

// The masters forget the lock scripts (SCRIPT FLUSH) again and again, and now and then one of
// them is killed and restarted empty, mid-run, while workers acquire, extend and release. Every
// EVALSHA may meet NOSCRIPT and fall back to EVAL; every restart costs that master its keys, its
// fence counters and its scripts, and the restart quarantine (on, the default) keeps its vote
// out until the locks it forgot have expired.

const TTL = 1_000;
const SHORT_MS = 5_000;
const FLUSH_EVERY_MS = 250;
const RESTART_EVERY = 6; // flushes

let fleet: RedisFleet | undefined;
let admin: Redis[] = [];
let run: SafetyRun | undefined;

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
  admin = await connectMasters(fleet.urls(), { enableOfflineQueue: true, maxRetriesPerRequest: null });
});

afterAll(async () => {
  await run?.dispose();
  disconnectAll(admin);
  await fleet?.stopAll();
});

for (const kind of KINDS) {
  it(`${kind.title}stays safe and live through SCRIPT FLUSH and master restarts mid-run`, async () => {
    const masters = fleet!;
    run = new SafetyRun({
      id: `script-flush-restart${kind.id}`,
      title: `${kind.title}SCRIPT FLUSH and master restarts mid-run`,
      expected: 'safe',
      method:
        `3 processes x 2 workers acquire, extend and release one resource (ttl ${TTL / 1000} s, quarantine on); every ` +
        `${FLUSH_EVERY_MS} ms some masters get SCRIPT FLUSH, every ${(FLUSH_EVERY_MS * RESTART_EVERY) / 1000} s one is restarted empty (default fences).`,
    });
    const scenario = run;
    // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
    scenario.forgeWakeups(masters.urls());
    await Promise.all(
      range(3).map((p) => scenario.spawn(loopWorker(`w${p}`, masters.urls(), { resources: ['flushed'], ttlMs: [TTL], extend: true, shared: kind.shared }))),
    );
    // The fresh fleet ages past the quarantine window before the faults begin.
    scenario.expect('the workers hold the lock before the faults', await scenario.until(() => scenario.holdsSince(scenario.startedAt) >= 3, 15_000));

    let restarts = 0;
    let liveAfterRestart = 0;
    const endAt = performance.now() + runFor(SHORT_MS);
    for (let tick = 1; performance.now() < endAt; tick++) {
      const flushed = shuffled(range(5)).slice(0, 1 + Math.floor(Math.random() * 5));
      await Promise.all(flushed.map((i) => untilReady(admin[i]!).then(() => admin[i]!.script('FLUSH'))));
      for (const i of flushed) scenario.fault(`SCRIPT FLUSH on master ${i}`);
      if (tick % RESTART_EVERY === 0) {
        const victim = Math.floor(Math.random() * 5);
        await masters.restart(victim);
        scenario.fault(`restart master ${victim} empty`);
        restarts++;
        const since = now();
        if (await scenario.until(() => scenario.holdsSince(since) >= 3, TTL * 3 + 5_000)) liveAfterRestart++;
      }
      await sleep(FLUSH_EVERY_MS);
    }
    await scenario.stopWorkers();

    scenario.expect(`live after every restart (${liveAfterRestart}/${restarts})`, restarts > 0 && liveAfterRestart === restarts);
    const codes = attempts(scenario.history.events())
      .filter((a) => a.end?.phase === 'fail')
      .map((a) => a.end!.code ?? '?');
    scenario.expect(
      'acquires fail only for contention or an unreachable quorum, never for a lost script',
      codes.every((code) => code === 'LOCK_HELD' || code === 'QUORUM_UNREACHABLE' || code === 'ACQUIRE_ABORTED'),
      tally(codes),
    );
    const extendFailures = scenario.history.events().filter((e) => e.op === 'extend' && e.phase === 'fail');
    scenario.expect(
      'no extension failed because of a lost script',
      extendFailures.every((e) => !e.error?.includes('NOSCRIPT')),
      tally(extendFailures.map((e) => e.code ?? '?')),
    );

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
