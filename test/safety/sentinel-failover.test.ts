import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { Redlock } from '../../lib/core/index.js';
import { freePort } from '../support/free-port.js';
import { connectVoters, disconnectAll, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { SentinelGroup, untilServes } from '../support/sentinel-group.js';
import { now } from './support/history.js';
import { LocalHolder } from './support/local-holder.js';
import { failures, runFor, SafetyRun, spread, timeoutFor, type ScenarioSpec } from './support/safety-run.js';
import { KINDS, loopWorker, range, type Kind } from './support/scenario-kit.js';
import { anotherEpisode, CONTROL_EXTRA_MS, MAX_SHORT_HOLDS, takeoverViolations, WholeHold } from './support/whole-hold.js';

// Sentinel failovers to replicas that missed live locks (spec section 5, the restart quarantine,
// for a master replaced behind a stable name).
//
// Three voters, each a Sentinel-managed master: a master, one replica and one Sentinel (quorum
// 1; the failovers are forced, which is what one Sentinel is enough for). Worker processes lock
// one resource through the Sentinels all along, one round every 20-70 ms. Each episode is made
// deterministic as in the restart scenario: holder A (in this process) holds exactly two voters,
// the victim and one other (its client for the third reaches nobody); the victim's replica is
// cut off before A acquires, so it lacks A's key; the victim's master is then SIGKILLed and
// Sentinel is made to promote the replica at once. The promoted replica and the third voter,
// which both know nothing of A, are a majority. With the restart quarantine on, the workers see
// the new run_id behind the victim's name and do not count it until every lock it may have
// missed has expired. The control runs the same with the quarantine off, and the checker must
// catch it. After each episode the old master comes back, empty, as the new master's replica.
// For a semaphore and a read-write lock A takes the whole resource (both permits of limit 2, or
// a writer among readers and writers: support/whole-hold.ts), so that a worker holding anything
// while A holds is a violation, as for the lock.

/**
 * A's lock outlasts a failover with seconds to spare, and the workers' own locks are short, so
 * that a worker's stale key on the promoted replica (a take ioredis re-sent after reconnecting,
 * long after its round ended) expires well within A's lock: without the quarantine, nothing
 * but the quarantine stands between the workers and A's lock.
 */
const HOLDER_TTL = 8_000;
const WORKER_TTL = 2_000;
const SHORT_MS = 8_000;
const RESOURCE = 'failover';
const NAMES = { lock: `redlock:${RESOURCE}`, holders: `redlock-holders:${RESOURCE}` };
/** A writes under the lock only with this much validity left. */
const WRITE_MARGIN_MS = HOLDER_TTL / 4;

let groups: SentinelGroup[] = [];
let run: SafetyRun | undefined;
const opened: Redis[] = [];

afterEach(async () => {
  await run?.dispose();
  disconnectAll(opened.splice(0));
  await Promise.all(groups.map((group) => group.stopAll()));
  groups = [];
});

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

async function failoverScenario(quarantine: boolean, kind: Kind): Promise<void> {
  groups = await Promise.all(range(3).map((i) => SentinelGroup.start({ name: `voter-${i}` })));
  const voters = groups.map((group) => group.clientOptions());
  const spec: ScenarioSpec = quarantine
    ? {
        id: `sentinel-failover${kind.id}`,
        title: `${kind.title}Sentinel failover to a replica that missed a live lock (quarantine on)`,
        expected: 'safe',
        method:
          '3 Sentinel-managed voters (master, replica, 1 Sentinel each). Holder A holds exactly 2 of them; the victim\'s ' +
          'replica is cut off before A acquires, then its master is SIGKILLed and SENTINEL FAILOVER promotes the replica, ' +
          'while 2 processes x 2 workers keep trying the same resource through the Sentinels, one tryAcquire every 20-70 ms ' +
          '(ttl 2 s; A\'s ttl 8 s, so the workers\' quarantine is set to 8 s; default fences). The old master then rejoins, ' +
          'empty, as a replica.' +
          (kind.name === 'semaphore' ? ' A holds both permits; the workers take permits.' : kind.name === 'read-write' ? ' A is a writer; the workers read or write.' : ''),
      }
    : {
        id: `sentinel-control${kind.id}`,
        title: `${kind.title}The same Sentinel failovers with restart quarantine off (control)`,
        expected: 'unsafe',
        method: 'As above, with restartQuarantineMs: false in the workers: the promoted replica votes at once.',
      };
  run = new SafetyRun(spec);
  const scenario = run;
  // The quarantine must cover the longest lock any process takes (A's), not only the workers' own.
  const engine = { restartQuarantineMs: quarantine ? HOLDER_TTL : (false as const) };
  await Promise.all(
    range(2).map((p) =>
      scenario.spawn(
        loopWorker(`w${p}`, [], { voters, resources: [RESOURCE], ttlMs: [WORKER_TTL], engine, single: true, separateEngines: true, pauseMs: 30, shared: kind.shared }),
      ),
    ),
  );

  // The workers make progress first: the servers have aged past their quarantine window.
  const warmedUp = await scenario.until(() => scenario.holdsSince(scenario.startedAt) >= 3, 20_000);
  scenario.expect('the workers hold the lock before the first episode', warmedUp);

  let episodes = 0;
  let takeovers = 0;
  let fencedTakeovers = 0;
  let lateWritesRejected = 0;
  let promotedWithoutKey = 0;
  let shortHolds = 0;
  const failoverMs: number[] = [];
  const endAt = performance.now() + runFor(SHORT_MS);
  do {
    episodes++;
    const victim = Math.floor(Math.random() * 3);
    const unreached = [0, 1, 2].filter((i) => i !== victim)[Math.floor(Math.random() * 2)]!;
    // A reaches the victim and one other voter; its client for the third reaches nobody.
    const reached = await connectVoters(voters.filter((_, i) => i !== unreached));
    opened.push(...reached);
    const clients = range(3).map((i) => (i === unreached ? undefined : reached.shift()));
    const aEngine = new Redlock(await Promise.all(clients.map(async (client) => client ?? (await deadMaster()))), {
      restartQuarantineMs: false, // A only ever acquires before the failover of its episode
      logger: { warn: () => {} },
    });
    const a = new LocalHolder(scenario, aEngine, 'A');

    const group = groups[victim]!;
    await group.holdReplication(); // the victim's replica misses everything from here on
    const hold = await WholeHold.take(a, kind, RESOURCE, HOLDER_TTL, 30_000);
    if (hold.isShort() && shortHolds++ < MAX_SHORT_HOLDS) {
      episodes--;
      await hold.end(aEngine, opened);
      await group.releaseReplication();
      continue;
    }
    const read = hold.read();
    const oldMaster = group.masterIndex;
    const failoverStarted = performance.now();
    await group.kill(oldMaster);
    const promoted = await group.failover();
    failoverMs.push(performance.now() - failoverStarted);
    if (await hold.isNotOn(group.direct(promoted), NAMES)) promotedWithoutKey++;
    scenario.fault(`voter ${victim} (one of A's two): master SIGKILLed, replica that missed A's key promoted`);
    const promotedAt = now();

    // Does a worker get the lock while A still holds it? Wait as long as A's lock can say.
    const taken = await scenario.until(
      () => scenario.holdsSince(promotedAt, (proc) => proc !== 'A') > 0,
      Math.max(0, hold.remainingMs() - WRITE_MARGIN_MS - 50),
    );
    // A write is refused only after a holder with a fence has been to the store.
    const fencedTakeover = taken && scenario.holdsSince(promotedAt, (proc) => proc !== 'A', true) > 0;
    if (fencedTakeover) fencedTakeovers++;
    if (taken) {
      takeovers++;
      // A goes on as if nothing happened (it cannot know), for a little while.
      await sleep(Math.min(100, Math.max(0, hold.remainingMs() - WRITE_MARGIN_MS - 10)));
    }
    const written = hold.write(read, WRITE_MARGIN_MS);
    if (fencedTakeover && written && !written.accepted) lateWritesRejected++;
    // A's client for the victim reaches the promoted server again before it releases there too.
    await untilServes(clients[victim]!, group.server(promoted).port).catch(() => {});
    await hold.end(aEngine, opened);
    await group.restartAsReplica(oldMaster); // empty, as the new master's replica: promotable next time
    await sleep(300); // the workers run undisturbed for a while between episodes
  } while (anotherEpisode({ endAt, episodes, quarantine, takeovers }));

  scenario.expect(
    `every failover promoted a replica that lacked A's key (${promotedWithoutKey}/${episodes}); failover took ${spread(failoverMs)}`,
    promotedWithoutKey === episodes,
  );
  if (quarantine) {
    scenario.expect(`no worker got the lock while A held it (${takeovers}/${episodes} episodes)`, takeovers === 0);
  } else {
    scenario.expect(`a worker got the lock while A held it (${takeovers}/${episodes} episodes)`, takeovers > 0);
    // Only the lock's takers all write: a reader that took over leaves the store alone, and the
    // checker's fence rules judge A's write then.
    if (kind.name === 'lock') {
      scenario.expect(
        `the fenced store refused A's write after every takeover by a fenced lock (${lateWritesRejected}/${fencedTakeovers})`,
        lateWritesRejected === fencedTakeovers,
      );
    }
  }
  const result = await scenario.finish();
  expect(failures(result)).toBe('');
  if (!quarantine) expect(takeoverViolations(kind).reduce((n, violation) => n + result.counts[violation], 0)).toBeGreaterThan(0);
}

describe('Sentinel failovers to replicas that missed a live lock', () => {
  for (const kind of KINDS) {
    it(`${kind.title}never let a second holder in while the restart quarantine is on`, () => failoverScenario(true, kind), timeoutFor(SHORT_MS));

    it(`${kind.title}are caught by the checker as a double grant with the quarantine off (control)`, () => failoverScenario(false, kind), timeoutFor(SHORT_MS) + CONTROL_EXTRA_MS);
  }
});
