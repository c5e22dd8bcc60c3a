import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { Redlock } from '../../lib/core/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { now } from './support/history.js';
import { LocalHolder } from './support/local-holder.js';
import { failures, runFor, SafetyRun, timeoutFor, type ScenarioSpec } from './support/safety-run.js';
import { loopWorker, range } from './support/scenario-kit.js';

// Restart one master of a current majority without persistence, immediately (spec section 5).
//
// Made deterministic: holder A (in this process) takes the lock while masters 3 and 4 are out of
// its reach, so it holds exactly masters {0, 1, 2}, a bare majority. One of those is then killed
// and restarted empty at once. Worker processes keep trying the same resource all along, one
// round every 20-70 ms (tryAcquire: how fast they notice does not depend on wake-ups): the
// restarted master plus 3 and 4 make a majority that knows nothing of A. With the restart
// quarantine on (the default), the workers do not count the restarted master until every lock
// it may have forgotten has expired: no overlap. The control runs the same with quarantine off
// and must be caught by the checker as unsafe: proof the checker sees this fault.

const TTL = 2_000;
const SHORT_MS = 4_000;
const RESOURCE = 'split';
/** A writes under the lock only with this much validity left (the same margin the workers use). */
const WRITE_MARGIN_MS = TTL / 4;

let fleet: RedisFleet | undefined;
let run: SafetyRun | undefined;
const opened: Redis[] = [];

afterEach(async () => {
  await run?.dispose();
  disconnectAll(opened.splice(0));
  await fleet?.stopAll();
});

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

async function restartScenario(quarantine: boolean): Promise<void> {
  fleet = await RedisFleet.start(5);
  const masters = fleet;
  const spec: ScenarioSpec = quarantine
    ? {
        id: 'restart-quarantine',
        title: 'Restart a master of the current majority, empty, at once (quarantine on)',
        expected: 'safe',
        method:
          'Holder A holds exactly masters {0,1,2}; one of them is SIGKILLed and restarted empty at once while 2 processes x 2 ' +
          'workers keep trying the same resource, one tryAcquire every 20-70 ms (ttl 2 s, restart quarantine on and default ' +
          'fences, as shipped).',
      }
    : {
        id: 'restart-control',
        title: 'The same with restart quarantine off (control)',
        expected: 'unsafe',
        method: 'As above, with restartQuarantineMs: false in the workers: the restarted master votes again at once.',
      };
  run = new SafetyRun(spec);
  const scenario = run;
  const engine = { restartQuarantineMs: quarantine ? undefined : (false as const) };
  await Promise.all(
    range(2).map((p) =>
      scenario.spawn(
        loopWorker(`w${p}`, masters.urls(), { resources: [RESOURCE], ttlMs: [TTL], engine, single: true, separateEngines: true, pauseMs: 30 }),
      ),
    ),
  );

  // A reaches masters 0-2; its clients for "3" and "4" point where nobody listens.
  const reachable = await connectMasters(masters.urls().slice(0, 3));
  opened.push(...reachable);
  const aEngine = new Redlock([...reachable, await deadMaster(), await deadMaster()], {
    restartQuarantineMs: false, // A only ever acquires before the restart of its episode
    logger: { warn: () => {} },
  });
  const a = new LocalHolder(scenario, aEngine, 'A');

  // The workers make progress first: the fleet has aged past their quarantine window.
  const warmedUp = await scenario.until(() => scenario.holdsSince(scenario.startedAt) >= 3, 15_000);
  scenario.expect('the workers hold the lock before the first episode', warmedUp);

  let episodes = 0;
  let takeovers = 0;
  let fencedTakeovers = 0;
  let lateWritesRejected = 0;
  const endAt = performance.now() + runFor(SHORT_MS);
  do {
    episodes++;
    const lock = await a.acquire(RESOURCE, TTL, 30_000);
    const read = a.read(lock);
    const victim = Math.floor(Math.random() * 3);
    await masters.kill(victim);
    await masters.start(victim); // empty: A's key on it is gone
    scenario.fault(`restart master ${victim} (one of A's majority) empty, at once`);
    const restartedAt = now();

    // Does a worker get the lock while A still holds it? Wait as long as A's lock can say.
    const taken = await scenario.until(
      () => scenario.holdsSince(restartedAt, (proc) => proc !== 'A') > 0,
      Math.max(0, lock.remainingMs() - WRITE_MARGIN_MS - 50),
    );
    // A write is refused only after a holder with a fence has been to the store.
    const fencedTakeover = taken && scenario.holdsSince(restartedAt, (proc) => proc !== 'A', true) > 0;
    if (fencedTakeover) fencedTakeovers++;
    if (taken) {
      takeovers++;
      // A goes on as if nothing happened (it cannot know), for a little while.
      await sleep(Math.min(100, Math.max(0, lock.remainingMs() - WRITE_MARGIN_MS - 10)));
    }
    const written = a.write(lock, read, WRITE_MARGIN_MS);
    if (fencedTakeover && !written.accepted) lateWritesRejected++;
    await a.release(lock);
    await sleep(300); // the workers run undisturbed for a while between episodes
  } while (performance.now() < endAt);
  aEngine.close?.();

  if (quarantine) {
    scenario.expect(`no worker got the lock while A held it (${takeovers}/${episodes} episodes)`, takeovers === 0);
  } else {
    scenario.expect(`a worker got the lock while A held it (${takeovers}/${episodes} episodes)`, takeovers > 0);
    scenario.expect(
      `the fenced store refused A's write after every takeover by a fenced lock (${lateWritesRejected}/${fencedTakeovers})`,
      lateWritesRejected === fencedTakeovers,
    );
  }
  const result = await scenario.finish();
  expect(failures(result)).toBe('');
  if (!quarantine) expect(result.counts.overlap).toBeGreaterThan(0);
}

describe('a master of the current majority restarted empty at once', () => {
  it('never lets a second holder in while the restart quarantine is on', () => restartScenario(true), timeoutFor(SHORT_MS));

  it('is caught by the checker as a double grant with the quarantine off (control)', () => restartScenario(false), timeoutFor(SHORT_MS));
});
