import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockLostError,
  LockUpgradeError,
  QuorumUnreachableError,
  LockHeldError,
  LockKindMismatchError,
  Redlock,
  type Lock,
  type RedlockOptions,
} from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, PATIENT, sharedAcquireWaiters, sharedRoundsOn, untilReady, waitingReports, watchCalls } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  disconnectAll(opened.splice(0));
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
  const cleaners = await connectMasters(fleet.urls());
  await Promise.all(cleaners.map((c) => c.flushall()));
  disconnectAll(cleaners);
});

afterAll(async () => {
  await fleet?.stopAll();
});

/** An engine with connections of its own: another process, as far as the masters can tell. */
async function engine(options: RedlockOptions = FRESH_FLEET): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { logger: { warn: () => {} }, ...options });
  await redlock.verifyMasters();
  return { redlock, clients };
}

describe("mode: 'read'", () => {
  it('admits many readers at once and no writer while one reads, on real masters', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const r1 = await a!.redlock.tryAcquire('doc', 10_000, { mode: 'read' });
    const r2 = await b!.redlock.tryAcquire('doc', 10_000, { mode: 'read' });
    expect(r1?.mode).toBe('read');
    expect(r2?.mode).toBe('read');
    // A writer, asked for explicitly or as a plain lock (the same thing), is refused while they read.
    expect(await c!.redlock.tryAcquire('doc', 10_000, { mode: 'write' })).toBeNull();
    expect(await c!.redlock.tryAcquire('doc', 10_000)).toBeNull();
    await r1!.release();
    expect(await c!.redlock.tryAcquire('doc', 10_000)).toBeNull(); // r2 still reads
    const released = await r2!.release();
    expect(released.heldUntilRelease).toBe(true);
    const writer = await c!.redlock.tryAcquire('doc', 10_000);
    expect(writer).not.toBeNull();
    // And no reader while the writer holds.
    expect(await a!.redlock.tryAcquire('doc', 10_000, { mode: 'read' })).toBeNull();
    await writer!.release();
  });

  it('never lets a writer in with anyone else, while readers do overlap', async () => {
    const engines = await Promise.all(Array.from({ length: 4 }, () => engine({ ...FRESH_FLEET, ...PATIENT })));
    let readers = 0;
    let writers = 0;
    let violations = 0;
    let mostReaders = 0;
    let writes = 0;
    await Promise.all(
      engines.flatMap(({ redlock }, e) =>
        Array.from({ length: 3 }, async (_, w) => {
          for (let i = 0; i < 6; i++) {
            const mode = (e + w + i) % 3 === 0 ? 'write' : 'read';
            await redlock.using(
              'mixed',
              5_000,
              async () => {
                if (mode === 'write') {
                  writers++;
                  writes++;
                  if (writers > 1 || readers > 0) violations++;
                } else {
                  readers++;
                  mostReaders = Math.max(mostReaders, readers);
                  if (writers > 0) violations++;
                }
                await sleep(2); // the work: lets the others try to get in
                if (mode === 'write') writers--;
                else readers--;
              },
              { mode, waitTimeoutMs: 60_000 },
            );
          }
        }),
      ),
    );
    expect(violations).toBe(0);
    expect(writes).toBe(24);
    expect(mostReaders).toBeGreaterThan(1);
  });

  it('wakes a waiting writer when the last reader releases, not when the readers expire', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const reader = await a!.redlock.acquire('wake', 120_000, { mode: 'read' });
    // Its fallback timer is the readers' remaining ttl, far beyond the test's timeout: only the
    // release's wake-up gets it in before that.
    const writer = b!.redlock.acquire('wake', 60_000, { waitTimeoutMs: 100_000 });
    await untilQueued(a!.clients, 'wake');
    await reader.release();
    const lock = await writer;
    expect(lock.mode).toBe('write');
    await lock.release();
  });

  it('keeps the marker as long as the latest reader, cuts it to the readers left when that one releases, and frees the key with the last', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const short = await a!.redlock.acquire('marker', 20_000, { mode: 'read' });
    const long = await b!.redlock.acquire('marker', 120_000, { mode: 'read' });
    const middle = await c!.redlock.acquire('marker', 60_000, { mode: 'read' });
    // Neither the earliest nor the middle deadline moves the marker: the latest reader still holds.
    await short.release();
    await middle.release();
    // Every acquire and release settled at a quorum: a lagging master gets the latest reader's
    // acquire a moment later, and then holds the marker as long as it (CI beside a second copy
    // once read 20 s there).
    await expect.poll(async () => (await markerPttls(a!.clients, 'marker')).filter((pttl) => pttl <= 100_000), { timeout: 5_000, interval: 10 }).toEqual([]);
    const writer = a!.redlock.acquire('marker', 10_000, { waitTimeoutMs: 60_000 });
    await untilQueued(a!.clients, 'marker');
    // The latest reader leaves with none left: the key goes to the queued writer at once, not at 120 s.
    await long.release();
    const lock = await writer;
    expect(lock.mode).toBe('write');
    await lock.release();
  });

  it('cuts the marker to the latest reader left when the latest reader releases, past a crashed reader', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    // A reader that never releases (its process "crashed"): its entry stays, dead after its ttl.
    const crashed = await c!.redlock.acquire('cut', 1_500, { mode: 'read' });
    const left = await a!.redlock.acquire('cut', 20_000, { mode: 'read' });
    const latest = await b!.redlock.acquire('cut', 120_000, { mode: 'read' });
    await latest.release();
    // Every master (a straggler's release lands after the quorum's): at most the reader left's 20 s.
    await expect.poll(async () => Math.max(...(await markerPttls(a!.clients, 'cut'))), { timeout: 5_000, interval: 10 }).toBeLessThanOrEqual(20_000);
    for (const pttl of await markerPttls(a!.clients, 'cut')) expect(pttl).toBeGreaterThan(0);
    // Once the crashed reader's entry is dead, the last live reader's release frees the key.
    const deadPast = async (client: Redis) => {
      const entry = await client.hget('redlock-holders:cut', crashed.token);
      const [seconds, micros] = await client.time();
      return entry === null || Number(entry.split(' ')[0]) < Number(seconds) * 1000 + Number(micros) / 1000;
    };
    await expect.poll(async () => (await Promise.all(a!.clients.map(deadPast))).every(Boolean), { timeout: 5_000, interval: 20 }).toBe(true);
    expect(await a!.clients[0]!.hexists('redlock-holders:cut', crashed.token)).toBe(1);
    await left.release();
    await expect.poll(async () => (await Promise.all(a!.clients.map((client) => client.exists('redlock:cut')))).every((n) => n === 0), { timeout: 5_000, interval: 10 }).toBe(true);
  });

  it("sends a writer whose process holds readers of the key straight to the queue, not a plain SET NX their marker refuses", async () => {
    const { redlock, clients } = await engine();
    const plainTakes: string[] = [];
    for (const client of clients) watchCalls(client, 'set', (args) => plainTakes.push(String(args[0])));
    const reader = await redlock.acquire('first-try', 10_000, { mode: 'read' });
    const writer = redlock.acquire('first-try', 10_000, { waitTimeoutMs: 30_000 });
    await untilQueued(clients, 'first-try');
    expect(plainTakes).toEqual([]);
    await reader.release();
    await (await writer).release();
    // The control: with no reader of this process holding, a writer's first try is the plain SET NX.
    await (await redlock.acquire('first-try', 10_000)).release();
    expect(plainTakes).toEqual(clients.map(() => 'redlock:first-try'));
  });

  it('does not let a stream of readers starve a waiting writer', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const first = await a!.redlock.acquire('stream', 60_000, { mode: 'read' });
    const writer = b!.redlock.acquire('stream', 60_000, { waitTimeoutMs: 30_000 });
    await untilQueued(a!.clients, 'stream');
    // Readers arriving after the writer queued wait behind it: none gets in beside the first.
    for (let i = 0; i < 3; i++) expect(await c!.redlock.tryAcquire('stream', 60_000, { mode: 'read' })).toBeNull();
    const later = c!.redlock.acquire('stream', 60_000, { mode: 'read', waitTimeoutMs: 30_000 });
    await first.release();
    const lock = await writer;
    await lock.release();
    // The reader queued behind the writer is woken by its release.
    await (await later).release();
  });

  it('keeps readers off the masters while another reader of their process waits queued behind a writer: they join the hold it wins', async () => {
    const { waited, instrumentation } = waitingReports();
    const [a, b] = await Promise.all([engine({ ...FRESH_FLEET, instrumentation }), engine()]);
    // Per round of engine a on master 0, the waiter id it carries.
    const rounds = sharedRoundsOn(a!.clients[0]!);
    // A first reader waits and is woken: this engine's wake-ups are listening from then on, so a
    // reader queued later sleeps after its one refused round (a fresh engine's reader asks again
    // once its subscription is confirmed, and is not asleep meanwhile).
    const firstWriter = await b!.redlock.acquire('behind-writer', 60_000);
    const warmUp = a!.redlock.acquire('behind-writer', 60_000, { mode: 'read', waitTimeoutMs: 30_000 });
    await expect.poll(() => waited[0]).toBe(true);
    await firstWriter.release();
    await (await warmUp).release();
    const writer = await b!.redlock.acquire('behind-writer', 60_000);
    const before = rounds.length;
    const first = a!.redlock.acquire('behind-writer', 60_000, { mode: 'read', waitTimeoutMs: 30_000 });
    await expect.poll(() => waited[1]).toBe(true);
    const firstId = rounds[before];
    // The others would only be refused: they stand by.
    const others = [0, 1, 2].map(() => a!.redlock.acquire('behind-writer', 60_000, { mode: 'read', waitTimeoutMs: 30_000 }));
    await expect.poll(() => waited).toEqual([true, true, true, true, true]);
    expect(rounds.slice(before).filter((id) => id !== firstId)).toEqual([]);
    await writer.release();
    // Woken once the first's round is over, they join the hold it won: none asks, all read together.
    const readers = await Promise.all([first, ...others]);
    expect(rounds.slice(before).filter((id) => id !== firstId)).toEqual([]);
    for (const reader of readers.slice(1)) expect(reader.rounds).toEqual([]);
    await Promise.all(readers.map((reader) => reader.release()));
  });

  it('extends and releases a reader, and signals its loss', async () => {
    const { redlock, clients } = await engine();
    const reader = await redlock.acquire('extend', 5_000, { mode: 'read' });
    await reader.extend(20_000);
    expect(reader.remainingMs()).toBeGreaterThan(5_000);
    // A round is decided at a quorum: master 0 may be the straggler whose extension lands later.
    await expect.poll(() => clients[0]!.pttl('redlock:extend')).toBeGreaterThan(5_000);
    // Its entries vanish from a majority (a flush): the next extension finds it lost.
    await Promise.all(clients.slice(0, 2).map((client) => client.del('redlock-holders:extend')));
    await expect(reader.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(reader.signal.aborted).toBe(true);
    await reader.release();
  });

  it('leaves nothing behind once readers and writers are released', async () => {
    const { redlock, clients } = await engine();
    const readers = await Promise.all([1, 2, 3].map(() => redlock.acquire('tidy', 5_000, { mode: 'read' })));
    await Promise.all(readers.map((r) => r.release()));
    const writer = await redlock.acquire('tidy', 5_000);
    await writer.release();
    // Releases settle at a quorum: a straggler master frees its keys a moment later.
    await expect.poll(() => Promise.all(clients.map((client) => client.keys('*tidy*')))).toEqual(clients.map(() => []));
  });

  it('gives readers and writers fencing tokens that rise from one holder to the next', async () => {
    const [a, b] = await Promise.all([engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false }), engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false })]);
    const w1 = await a!.redlock.acquire('fenced-rw', 5_000);
    await w1.release();
    const r1 = await a!.redlock.acquire('fenced-rw', 5_000, { mode: 'read' });
    const r2 = await b!.redlock.acquire('fenced-rw', 5_000, { mode: 'read' });
    await Promise.all([r1.release(), r2.release()]);
    const w2 = await b!.redlock.acquire('fenced-rw', 5_000);
    await w2.release();
    expect(w1.fence).toBe(1);
    expect(r1.fence).toBe(2);
    expect(r2.fence).toBe(3); // began after r1 was handed its lock
    expect(w2.fence).toBe(4);
  });

  it('is all or nothing over several resources', async () => {
    const { redlock, clients } = await engine();
    const other = await engine();
    const writer = await other.redlock.acquire('multi-b', 10_000);
    expect(await redlock.tryAcquire(['multi-a', 'multi-b'], 10_000, { mode: 'read' })).toBeNull();
    for (const client of clients) {
      expect(await client.exists('redlock:multi-a', 'redlock-holders:multi-a')).toBe(0);
    }
    await writer.release();
    const both = await redlock.tryAcquire(['multi-a', 'multi-b'], 10_000, { mode: 'read' });
    expect(both).not.toBeNull();
    expect(await other.redlock.tryAcquire('multi-a', 10_000)).toBeNull();
    await both!.release();
  });

  it('refuses a mode that is neither read nor write', async () => {
    const { redlock } = await engine();
    await expect(redlock.acquire('bad', 5_000, { mode: 'exclusive' as 'write' })).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe('reentrancy', () => {
  it('runs a read inside a write, or a read inside a read, under the outer hold', async () => {
    const { redlock } = await engine();
    await redlock.using('re', 5_000, async (_signal, outer) => {
      const inner = await redlock.enter('re', 5_000, { mode: 'read' });
      expect(inner.reentrant).toBe(true);
      expect(inner.lock).toBe(outer);
      await inner.exit();
    });
    await redlock.using(
      're',
      5_000,
      async () => {
        await redlock.using('re', 5_000, async () => undefined, { mode: 'read' });
      },
      { mode: 'read' },
    );
  });

  it('refuses a read to write upgrade with a typed error instead of waiting for itself', async () => {
    const { redlock } = await engine();
    const error = await redlock
      .using('upgrade', 5_000, () => redlock.using('upgrade', 5_000, async () => 'never'), { mode: 'read' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockUpgradeError);
    expect((error as LockUpgradeError).resources).toEqual(['upgrade']);
    // Released on the way out: a writer gets it now.
    const writer = await redlock.tryAcquire('upgrade', 5_000);
    expect(writer).not.toBeNull();
    await writer!.release();
  });
});

describe('restart quarantine', () => {
  it("keeps a restarted master's vote from letting a writer in beside a reader (the control shows it would)", async () => {
    const a = await engine();
    await fleet.kill(2);
    const reader = await a.redlock.acquire('split-rw', 30_000, { mode: 'read' }); // a bare majority {0, 1}
    await fleet.start(2);
    // A window far longer than this fleet has lived: every master is young at the guarded engine's
    // first sight, however long the tests before took (with 30 s, a slow run saw masters 0 and 1 as old).
    const guarded = await engine({ restartQuarantineMs: 600_000 });
    const unguarded = await engine();
    await expect(guarded.redlock.tryAcquire('split-rw', 30_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
    expect(await unguarded.redlock.tryAcquire('split-rw', 30_000)).toBeNull();

    await fleet.restart(1); // without persistence: the reader's entry and marker on master 1 are gone
    await Promise.all([...guarded.clients, ...unguarded.clients].map(untilReady));
    const guardedTry = await guarded.redlock.tryAcquire('split-rw', 30_000).catch((e: unknown) => e);
    expect(guardedTry === null || guardedTry instanceof QuorumUnreachableError || guardedTry instanceof LockHeldError).toBe(true);
    const second = await unguarded.redlock.tryAcquire('split-rw', 30_000);
    expect(second).not.toBeNull();
    expect(reader.remainingMs()).toBeGreaterThan(0);
  });
});

/** Resolves once some master holds a waiter in the resource's fair queue: the waiter was refused and enlisted. */
/** The lock key's PTTL on every master: how long the readers' marker lives there. */
function markerPttls(clients: readonly Redis[], resource: string): Promise<number[]> {
  return Promise.all(clients.map((client) => client.pttl(`redlock:${resource}`)));
}

async function untilQueued(clients: readonly Redis[], resource: string): Promise<void> {
  await expect.poll(async () => Math.max(...(await Promise.all(clients.map((c) => c.hlen(`redlock-queue:${resource}`))))), { timeout: 20_000 }).toBeGreaterThan(0);
}

// Readers and permits of one process that ask in one tick (a writer's release wakes them
// together) reach each master in two calls: the first alone, the others in one batch that the
// master runs one after the other, as it would have run them sent apart.
/** Per master, each shared acquire call the engine sends it from now on, as the waiter ids it carries. */
function sharedCalls(clients: readonly Redis[]): string[][][] {
  return clients.map((client) => {
    const calls: string[][] = [];
    watchCalls(client, 'evalsha', (args) => {
      const waiters = sharedAcquireWaiters(args);
      if (waiters.length > 0) calls.push(waiters);
    });
    return calls;
  });
}

const holders = (clients: readonly Redis[], resource: string) => Promise.all(clients.map((client) => client.hlen(`redlock-holders:${resource}`)));

/**
 * An acquire or release returns once a majority answered: a master whose request was slower (a
 * straggler, or one re-sent as EVAL after NOSCRIPT) may still be applying it. So wait for every
 * master to settle at `counts`; one that never does fails the test.
 */
const settledHolders = (clients: readonly Redis[], resource: string, counts: number[]) =>
  expect.poll(() => holders(clients, resource), { timeout: 5_000, interval: 10 }).toEqual(counts);

// Fenced readers below: unfenced readers of one process asking at once share one round (readers-share.test.ts).
describe('shared acquires of one tick', () => {
  it('go to each master as one call alone and one batch, and every reader holds', async () => {
    const { redlock, clients } = await engine();
    const calls = sharedCalls(clients);
    const readers = await Promise.all([0, 1, 2, 3].map(() => redlock.acquire('together', 10_000, { mode: 'read', fencing: true })));
    expect(readers.map((reader) => reader.mode)).toEqual(['read', 'read', 'read', 'read']);
    for (const perMaster of calls) {
      expect(perMaster.map((waiters) => waiters.length)).toEqual([1, 3]);
      // Four callers, each asking once.
      expect(new Set(perMaster.flat()).size).toBe(4);
    }
    await settledHolders(clients, 'together', [4, 4, 4]);
    await Promise.all(readers.map((reader) => reader.release()));
    await settledHolders(clients, 'together', [0, 0, 0]);
  });

  it('never let more permits in than the limit: a batch is judged request by request', async () => {
    const { redlock, clients } = await engine();
    const calls = sharedCalls(clients);
    const tries = await Promise.all([0, 1, 2, 3].map(() => redlock.tryAcquire('pool', 10_000, { limit: 2 })));
    const permits = tries.filter((permit): permit is Lock => permit !== null);
    expect(permits).toHaveLength(2);
    expect(permits.map((permit) => permit.slots![0]).sort()).toEqual([0, 1]);
    for (const perMaster of calls) expect(perMaster.map((waiters) => waiters.length)).toEqual([1, 3]);
    await settledHolders(clients, 'pool', [2, 2, 2]);
    await Promise.all(permits.map((permit) => permit.release()));
  });

  it('fail only the request whose key holds another kind, not the others of its batch', async () => {
    const other = await engine();
    const permit = await other.redlock.acquire('a-pool', 10_000, { limit: 2 });
    const { redlock, clients } = await engine();
    const calls = sharedCalls(clients);
    const [first, mismatched, third] = await Promise.allSettled([
      redlock.acquire('a-doc', 10_000, { mode: 'read', fencing: true }),
      redlock.acquire('a-pool', 10_000, { mode: 'read', waitTimeoutMs: 5_000 }),
      redlock.acquire('a-doc', 10_000, { mode: 'read', fencing: true }),
    ]);
    expect(first.status === 'fulfilled' && first.value.mode).toBe('read');
    expect(third.status === 'fulfilled' && third.value.mode).toBe('read');
    expect(mismatched.status === 'rejected' && mismatched.reason).toBeInstanceOf(LockKindMismatchError);
    // The mismatched reader and the third went in one batch.
    for (const perMaster of calls) expect(perMaster[1]).toHaveLength(2);
    await settledHolders(clients, 'a-doc', [2, 2, 2]);
    await permit.release();
  });

  it('are sent whole when a master has lost its scripts (SCRIPT FLUSH), and still hold', async () => {
    const { redlock, clients } = await engine();
    await Promise.all(clients.map((client) => client.script('FLUSH')));
    const readers = await Promise.all([0, 1, 2].map(() => redlock.acquire('flushed', 10_000, { mode: 'read', fencing: true })));
    expect(readers.every((reader) => reader.mode === 'read')).toBe(true);
    await settledHolders(clients, 'flushed', [3, 3, 3]);
    await Promise.all(readers.map((reader) => reader.release()));
  });
});
