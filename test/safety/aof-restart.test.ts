import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisFleet } from '../support/redis-fleet.js';
import { now } from './support/history.js';
import { failures, runFor, SafetyRun, timeoutFor } from './support/safety-run.js';
import { loopWorker, range } from './support/scenario-kit.js';

// Masters that keep their data (AOF with appendfsync always) are killed and restarted, mid-run,
// with the restart quarantine off, as docs/GUARANTEES.md allows for such masters. What a
// restart keeps is the hand-off's concern: the queue entries of waiters survive it, so the
// first release after it may grant the lock to a waiter whose request went over a connection
// that the restart closed. Such a grant must not count (its waiter cannot know whether its own
// cleanup reached that master before or after), and the waiter's next round must take the key
// back. Workers acquire, extend and release one resource, half of their cycles unfenced, so
// the releases grant the lock to waiters all along.

const TTL = 1_000;
const SHORT_MS = 5_000;
const RESTART_EVERY_MS = 1_500;

let fleet: RedisFleet | undefined;
let run: SafetyRun | undefined;

beforeAll(async () => {
  fleet = await RedisFleet.start(5, { appendonly: true, extraArgs: ['--appendfsync', 'always'] });
});

afterAll(async () => {
  await run?.dispose();
  await fleet?.stopAll();
});

it('stays safe and live through restarts of masters that keep their data (AOF, quarantine off)', async () => {
  const masters = fleet!;
  run = new SafetyRun({
    id: 'aof-restart',
    title: 'Masters with AOF (appendfsync always) killed and restarted with their data, quarantine off',
    expected: 'safe',
    method:
      `3 processes x 2 workers acquire, extend and release one resource (ttl ${TTL / 1000} s, restartQuarantineMs: false, ` +
      `half the cycles unfenced, so releases hand the lock to waiters); every ${RESTART_EVERY_MS / 1000} s one master ` +
      'is SIGKILLed and restarted from its append-only file.',
  });
  const scenario = run;
  // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
  scenario.forgeWakeups(masters.urls());
  const engine = { restartQuarantineMs: false as const };
  await Promise.all(range(3).map((p) => scenario.spawn(loopWorker(`w${p}`, masters.urls(), { resources: ['kept'], ttlMs: [TTL], extend: true, engine }))));
  scenario.expect('the workers hold the lock before the faults', await scenario.until(() => scenario.holdsSince(scenario.startedAt) >= 3, 15_000));

  let restarts = 0;
  let liveAfterRestart = 0;
  const endAt = performance.now() + runFor(SHORT_MS);
  while (performance.now() < endAt) {
    const victim = Math.floor(Math.random() * 5);
    await masters.restart(victim, { keepData: true });
    scenario.fault(`kill master ${victim}, restart it with its data`);
    restarts++;
    const since = now();
    if (await scenario.until(() => scenario.holdsSince(since) >= 3, TTL * 3 + 5_000)) liveAfterRestart++;
    await sleep(RESTART_EVERY_MS);
  }
  await scenario.stopWorkers();

  scenario.expect(`live after every restart (${liveAfterRestart}/${restarts})`, restarts > 0 && liveAfterRestart === restarts);
  const handedOff = scenario.history.events().filter((e) => e.op === 'acquire' && e.phase === 'ok' && e.handedOff).length;
  scenario.expect('releases handed the lock to waiters during the run', handedOff > 0, `${handedOff} holds by hand-off`);
  const result = await scenario.finish();
  expect(failures(result)).toBe('');
}, timeoutFor(SHORT_MS));
