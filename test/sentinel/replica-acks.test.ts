import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, QuorumUnreachableError, Redlock, type RedlockOptions } from '../../lib/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, FRESH_FLEET, LOCK_CLIENT_OPTIONS, untilReady, watchCalls } from '../support/masters.js';
import { SentinelGroup, sentinelClient, untilServes } from '../support/sentinel-group.js';
import { CLIENT_LIBRARIES, connectLockClients, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';

// Three voters, each a master with one replica: the first managed by a Sentinel (one, quorum 1:
// the failovers here are forced), the other two plain replicated pairs. `replicaAcks: 1` makes
// every granting write wait (WAIT) for its master's replica.

let groups: SentinelGroup[];
const opened: (Redis | RedlockClient)[] = [];
const silent = { warn: () => {} };

beforeAll(async () => {
  groups = await Promise.all([
    SentinelGroup.start({ name: 'acked-0' }),
    SentinelGroup.start({ name: 'acked-1', sentinels: 0 }),
    SentinelGroup.start({ name: 'acked-2', sentinels: 0 }),
  ]);
});

afterEach(async () => {
  disconnectAll(opened.splice(0));
  for (const group of groups) for (const index of group.replicaIndexes()) if (group.server(index).paused) group.resume(index);
});

afterAll(async () => {
  await Promise.all((groups ?? []).map((group) => group.stopAll()));
});

/**
 * One client per voter: the Sentinel-managed one, then the two plain masters. On node-redis,
 * whose Sentinel client cannot vote, the first voter's master is reached directly.
 */
async function voters(library: ClientLibrary = 'ioredis'): Promise<RedlockClient[]> {
  if (library === 'node-redis') {
    const clients = await connectLockClients(library, groups.map((group) => group.masterUrl()));
    opened.push(...clients);
    return clients;
  }
  const viaSentinel = sentinelClient(groups[0]!);
  opened.push(viaSentinel);
  await untilReady(viaSentinel);
  const direct = await connectMasters(groups.slice(1).map((group) => group.masterUrl()));
  opened.push(...direct);
  return [viaSentinel, ...direct];
}

async function engine(options: RedlockOptions, clients?: RedlockClient[], library: ClientLibrary = 'ioredis'): Promise<{ redlock: Redlock; clients: RedlockClient[] }> {
  const list = clients ?? (await voters(library));
  // A generous round: a WAIT that runs out (3/4 of it) still answers before the round's deadline,
  // and a loaded machine does not turn a slow reply into a timeout.
  const redlock = new Redlock(list, { ...FRESH_FLEET, logger: silent, nodeTimeoutMs: 2_000, ...options });
  await redlock.verifyMasters();
  return { redlock, clients: list };
}

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

/** Per client, how many WAITs it has sent so far. */
function countWaits(clients: readonly RedlockClient[]): number[] {
  const counts = clients.map(() => 0);
  clients.forEach((client, index) => watchCalls(client, 'wait', () => counts[index]!++));
  return counts;
}

function pauseReplicas(...indexes: number[]): void {
  for (const index of indexes) for (const replica of groups[index]!.replicaIndexes()) groups[index]!.pause(replica);
}

describe('replicaAcks', () => {
  it('is checked like every option', () => {
    for (const value of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1']) {
      expect(() => new Redlock([new Redis({ lazyConnect: true })], { replicaAcks: value as number })).toThrow(InvalidArgumentError);
    }
    expect(() => new Redlock([new Redis({ lazyConnect: true })], { replicaAcks: -1 })).toThrow(/replicaAcks/);
  });
});

describe.each(CLIENT_LIBRARIES)('replicaAcks on %s', (library: ClientLibrary) => {
  it('grants once the replicas acknowledged; every granting write carries one WAIT, releases none', async () => {
    const { redlock, clients } = await engine({ replicaAcks: 1, fencing: true }, undefined, library);
    // Once, so the masters have the scripts: a NOSCRIPT answer re-sends a script with a WAIT of its own.
    const warm = await redlock.acquire(['acked-a', 'acked-b'], 5_000);
    await warm.extend(5_000);
    await warm.release();
    // The rounds settle at a quorum: a straggler's extension and WAIT are counted only once its
    // release, queued behind them on the same connection, has run.
    const masters = groups.map((group) => group.direct(group.masterIndex));
    await expect.poll(() => Promise.all(masters.map((master) => master.exists('redlock:acked-a', 'redlock:acked-b')))).toEqual([0, 0, 0]);
    const waits = countWaits(clients);
    const lock = await redlock.acquire(['acked-a', 'acked-b'], 5_000); // acquire script, then fence write-back
    // The round settles at a quorum: the third master's WAITs may land after it.
    await expect.poll(() => waits).toEqual([2, 2, 2]);
    const replicas = groups.map((group) => group.direct(group.replicaIndexes()[0]!));
    const onReplicas = await Promise.all(replicas.map((replica) => replica.exists('redlock:acked-a', 'redlock:acked-b')));
    expect(onReplicas.filter((count) => count === 2).length).toBeGreaterThanOrEqual(2);
    await lock.extend(5_000);
    await expect.poll(() => waits).toEqual([3, 3, 3]);
    await lock.release();
    expect(waits).toEqual([3, 3, 3]);
  });

  it('covers a tick of batched takes with one WAIT per master', async () => {
    const { redlock, clients } = await engine({ replicaAcks: 1 }, undefined, library);
    const waits = countWaits(clients);
    // Started in one tick: the first take goes out alone, the other 39 as one script, each with one WAIT behind.
    const locks = await Promise.all(Array.from({ length: 40 }, (_, i) => redlock.tryAcquire(`batch-${i}`, 5_000)));
    expect(locks.every((lock) => lock !== null)).toBe(true);
    await expect.poll(() => waits).toEqual([2, 2, 2]);
    await Promise.all(locks.map((lock) => lock!.release()));
  });

  it("refuses a master's vote, naming it, while its replica acknowledges nothing (and without replicaAcks grants)", async () => {
    const acked = await engine({ replicaAcks: 1 }, undefined, library);
    const unacked = await engine({}, undefined, library);
    pauseReplicas(1, 2); // SIGSTOP: the replicas of masters 1 and 2 take nothing in
    const error = await acked.redlock.tryAcquire('unreplicated', 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const message = (error as Error).message;
    for (const index of [1, 2]) {
      expect(message).toContain(`127.0.0.1:${groups[index]!.server(groups[index]!.masterIndex).port}`);
    }
    expect(message).toMatch(/only 0 of the 1 replicas required \(replicaAcks\) acknowledged the write/);

    const lock = await unacked.redlock.tryAcquire('unreplicated', 5_000);
    expect(lock).not.toBeNull();
    await lock!.release();
  });

  it('refuses an extension its replicas did not acknowledge', async () => {
    const { redlock } = await engine({ replicaAcks: 1 }, undefined, library);
    const lock = await redlock.acquire('extend-acked', 5_000);
    pauseReplicas(1, 2);
    await expect(lock.extend(5_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
    expect(lock.remainingMs()).toBeLessThanOrEqual(5_000);
    await lock.release();
  });
});

// ioredis only: node-redis's Sentinel client cannot vote (docs/clients.md).
describe('a failover of a voter that held a bare majority', () => {
  /**
   * `holder` holds exactly voters 0 (Sentinel) and 1: its third client reaches nobody. Voter 0's
   * replicas are cut off (before or after the acquire), its master crashes, and Sentinel
   * promotes the replica. A fresh engine, which never saw the old master (so no quarantine
   * can help), then tries the same lock: voters 0 and 2 would be a majority.
   */
  async function failoverAfter(resource: string, options: RedlockOptions, cutBeforeAcquire: boolean): Promise<{ promotedHasKey: boolean; secondHolder: boolean }> {
    const group = groups[0]!;
    const [viaSentinel, first] = await voters();
    const { redlock: holder } = await engine(options, [viaSentinel!, first!, await deadMaster()]);
    if (cutBeforeAcquire) await group.holdReplication();
    const lock = await holder.acquire(resource, 20_000);
    if (!cutBeforeAcquire) await group.holdReplication(); // what the master writes from now on is lost
    const old = group.masterIndex;
    await group.kill(old);
    const promoted = await group.failover();
    const promotedHasKey = (await group.direct(promoted).exists(`redlock:${resource}`)) === 1;
    const fresh = await voters();
    await untilServes(fresh[0] as Redis, group.server(promoted).port);
    const { redlock: second } = await engine(FRESH_FLEET, fresh);
    const taken = await second.tryAcquire(resource, 20_000);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    await taken?.release();
    await lock.release();
    holder.close();
    await group.restartAsReplica(old);
    return { promotedHasKey, secondHolder: taken !== null };
  }

  it('loses no lock with replicaAcks: the promoted replica had acknowledged it', async () => {
    expect(await failoverAfter('kept', { replicaAcks: 1 }, false)).toEqual({ promotedHasKey: true, secondHolder: false });
  }, 60_000);

  it('loses the lock without replicaAcks when the replica lagged: a second holder gets it (control)', async () => {
    expect(await failoverAfter('lost', {}, true)).toEqual({ promotedHasKey: false, secondHolder: true });
  }, 60_000);
});
