import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockKindMismatchError, LockLostError, Redlock, type Lock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, lockClient, sharedRoundsOn, waitingReports } from '../support/masters.js';
import { freePort } from '../support/free-port.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  disconnectAll(opened.splice(0));
  const cleaners = await connectMasters(fleet.urls());
  await Promise.all(cleaners.map((c) => c.flushall()));
  disconnectAll(cleaners);
});

afterAll(async () => {
  await fleet?.stopAll();
});

async function engine(options: RedlockOptions = FRESH_FLEET): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { logger: { warn: () => {} }, ...options });
  await redlock.verifyMasters();
  return { redlock, clients };
}

interface PermitHold {
  slot: number;
  handedOver: boolean;
}

/**
 * `workers` callers of one engine take a permit of a limit-2 semaphore `cycles` times each, hold
 * it a millisecond and release it; never more than 2 hold at once. Every hold, in the order it began.
 */
async function contendForPermits(redlock: Redlock, resource: string, workers: number, cycles: number): Promise<PermitHold[]> {
  const holds: PermitHold[] = [];
  let inside = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = 0; i < cycles; i++) {
        const permit = await redlock.acquire(resource, 10_000, { limit: 2, waitTimeoutMs: 60_000 });
        inside++;
        expect(inside).toBeLessThanOrEqual(2);
        const hold: PermitHold = { slot: permit.slots![0]!, handedOver: false };
        holds.push(hold);
        await sleep(1);
        inside--;
        hold.handedOver = (await permit.release()).handedOver === true;
      }
    }),
  );
  return holds;
}

/** An engine that reaches only the masters in `reachable`; the others are a port nobody listens on. */
async function partitioned(reachable: readonly number[]): Promise<Redlock> {
  const urls = fleet.urls();
  const clients = await Promise.all(
    urls.map(async (url, index) => (reachable.includes(index) ? (await connectMasters([url]))[0]! : lockClient(`redis://127.0.0.1:${await freePort()}`))),
  );
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} } });
  await redlock.verifyMasters();
  return redlock;
}

describe('limit (a semaphore)', () => {
  it('admits at most limit holders, each on its own slot, and the next once one leaves', async () => {
    const engines = await Promise.all([1, 2, 3, 4].map(() => engine()));
    const permits: (Lock | null)[] = [];
    for (const { redlock } of engines.slice(0, 3)) permits.push(await redlock.tryAcquire('api', 10_000, { limit: 3 }));
    expect(permits.every((p) => p !== null)).toBe(true);
    expect(new Set(permits.map((p) => p!.slots![0])).size).toBe(3);
    expect(permits[0]!.limit).toBe(3);
    expect(await engines[3]!.redlock.tryAcquire('api', 10_000, { limit: 3 })).toBeNull();
    await permits[1]!.release();
    const fourth = await engines[3]!.redlock.tryAcquire('api', 10_000, { limit: 3 });
    expect(fourth?.slots).toEqual(permits[1]!.slots);
    await Promise.all([permits[0]!, permits[2]!, fourth!].map((p) => p.release()));
    // Releases settle at a quorum: a straggler master frees its entries a moment later.
    await expect.poll(() => Promise.all(engines[0]!.clients.map((client) => client.keys('*api*')))).toEqual(engines[0]!.clients.map(() => []));
  });

  it('never has more than limit holders among many concurrent clients', async () => {
    const engines = await Promise.all(Array.from({ length: 4 }, () => engine()));
    let inside = 0;
    let mostInside = 0;
    let cycles = 0;
    await Promise.all(
      engines.flatMap(({ redlock }) =>
        Array.from({ length: 3 }, async () => {
          for (let i = 0; i < 5; i++) {
            await redlock.using(
              'export',
              5_000,
              async () => {
                inside++;
                mostInside = Math.max(mostInside, inside);
                await sleep(2);
                inside--;
                cycles++;
              },
              { limit: 3, waitTimeoutMs: 60_000 },
            );
          }
        }),
      ),
    );
    expect(mostInside).toBeLessThanOrEqual(3);
    expect(mostInside).toBeGreaterThan(1);
    expect(cycles).toBe(60);
  });

  it('gives no third permit of limit 2 to holders on three different majorities (per-master counters would)', async () => {
    // A on masters {0,1}, B on {0,2}, C on {1,2}: every master sees only two of them, so a
    // per-master count would admit all three. Slots do not: C needs a slot that A or B holds on
    // a master C reaches.
    const a = await partitioned([0, 1]);
    const b = await partitioned([0, 2]);
    const c = await partitioned([1, 2]);
    const pa = await a.tryAcquire('pigeon', 30_000, { limit: 2 });
    const pb = await b.tryAcquire('pigeon', 30_000, { limit: 2 });
    const pc = await c.tryAcquire('pigeon', 30_000, { limit: 2 });
    expect(pa).not.toBeNull();
    expect(pb).not.toBeNull();
    expect(pc).toBeNull();
    expect(pa!.slots).not.toEqual(pb!.slots);
  });

  /** On master `index` only, `slots` of resource `name` (limit 2) taken by a holder of another process, for a minute. */
  async function foreignHolder(clients: Redis[], index: number, name: string, slots: number[]): Promise<void> {
    const client = clients[index]!;
    const [seconds, micros] = (await client.time()) as unknown as [string, string];
    const deadline = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 60_000;
    for (const slot of slots) await client.hset(`redlock-holders:${name}`, `foreign-${slot}`, `${deadline} ${slot}`);
    await client.pexpire(`redlock-holders:${name}`, 60_000);
    await client.set(`redlock:${name}`, '*s2', 'PX', 60_000);
  }

  it('drops at once the entry of a master that granted another slot than the majority', async () => {
    const { clients } = await engine();
    // Master 2 has slot 0 taken: it grants slot 1 where masters 0 and 1 grant slot 0. Slowed
    // down, it answers after the round was decided by the other two.
    await foreignHolder(clients, 2, 'odd', [0]);
    const slow = await TcpProxy.start({ host: '127.0.0.1', port: fleet.nodes[2]!.port });
    try {
      slow.setLatency(100);
      const urls = fleet.urls().map((url, index) => (index === 2 ? slow.url : url));
      const proxied = await connectMasters(urls);
      opened.push(...proxied);
      const redlock = new Redlock(proxied, { ...FRESH_FLEET, nodeTimeoutMs: 2_000, logger: { warn: () => {} } });
      await redlock.verifyMasters();
      const permit = await redlock.tryAcquire('odd', 60_000, { limit: 2 });
      expect(permit?.slots).toEqual([0]);
      // Queued behind the acquire on master 2's connection: once it answers, the late grant of slot 1 has landed.
      await proxied[2]!.ping();
      // That entry is no part of the permit, and kept slot 1 of master 2 from the next waiter until an extension or the release.
      await expect.poll(() => clients[2]!.hexists('redlock-holders:odd', permit!.token)).toBe(0);
      expect(await clients[0]!.hexists('redlock-holders:odd', permit!.token)).toBe(1);
      await permit!.release();
    } finally {
      await slow.close();
    }
  });

  it('after a win, leaves the queue of a master that refused it', async () => {
    const { redlock, clients } = await engine();
    // Master 2 is full: it refuses, and queues the caller; masters 0 and 1 grant.
    await foreignHolder(clients, 2, 'queued', [0, 1]);
    const permit = await redlock.acquire('queued', 60_000, { limit: 2 });
    await clients[2]!.ping(); // behind the acquire on the engine's connection: master 2's refusal has landed
    // The entry would head master 2's queue for the minute the foreign holders last, ahead of every later waiter.
    await expect.poll(() => clients[2]!.hlen('redlock-queue:queued')).toBe(0);
    await permit.release();
  });

  it('wakes a waiter when a permit is released, and lets no newcomer overtake it', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const held = await Promise.all([a!.redlock.acquire('pool', 120_000, { limit: 2 }), a!.redlock.acquire('pool', 120_000, { limit: 2 })]);
    // Its fallback timer is the permits' ttl, far beyond the test's timeout: only a wake-up gets it in.
    const waiter = b!.redlock.acquire('pool', 60_000, { limit: 2, waitTimeoutMs: 100_000 });
    await expect.poll(() => a!.clients[0]!.hlen('redlock-queue:pool'), { timeout: 20_000 }).toBeGreaterThan(0);
    await held[0].release();
    // The waiter is first in line: a newcomer's single round is refused whether or not it got in yet.
    expect(await c!.redlock.tryAcquire('pool', 60_000, { limit: 2 })).toBeNull();
    const permit = await waiter;
    expect(permit.slots).toEqual(held[0].slots);
    await Promise.all([permit.release(), held[1].release()]);
  });

  it('hands released permits to callers of the same process asleep for them, never admitting a holder more', async () => {
    const { redlock, clients } = await engine();
    const holds = await contendForPermits(redlock, 'local-pool', 5, 12);
    expect(holds).toHaveLength(60);
    // Most releases find a caller asleep between its rounds; without hand-over there would be none.
    expect(holds.filter((hold) => hold.handedOver).length).toBeGreaterThan(10);
    // A handed permit keeps the slot of the permit it came from: the slots in use stay two.
    expect(new Set(holds.map((hold) => hold.slot)).size).toBeLessThanOrEqual(2);
    await expect.poll(async () => (await Promise.all(clients.map((client) => client.exists('redlock-holders:local-pool')))).every((n) => n === 0)).toBe(true);
  });

  it('keeps a caller off the masters while ours hold the permits and another of ours waits refused: it is handed one', async () => {
    const { waited, instrumentation } = waitingReports();
    const { redlock, clients } = await engine({ ...FRESH_FLEET, instrumentation });
    // Per acquire round on master 0, the waiter id it carries.
    const rounds = sharedRoundsOn(clients[0]!);
    const held = await Promise.all([0, 1].map(() => redlock.acquire('kept-off', 60_000, { limit: 2 })));
    // The first waiter of ours asks and is refused: the permits are all taken.
    const first = redlock.acquire('kept-off', 60_000, { limit: 2, waitTimeoutMs: 100_000 });
    await expect.poll(() => waited[2]).toBe(true);
    const firstWaiter = rounds.at(-1)!;
    // The next would only be refused too: it waits for a holder of ours instead of asking.
    const second = redlock.acquire('kept-off', 60_000, { limit: 2, waitTimeoutMs: 100_000 });
    await expect.poll(() => waited[3]).toBe(true);
    const releases = await Promise.all(held.map((permit) => permit.release()));
    // The second stands by asleep, so a release hands it a permit. The first may be making its
    // round again just then (a fresh engine's, once its wake-up subscription is confirmed): the
    // other release then frees its permit on the masters for it.
    expect(releases.filter((release) => release.handedOver)).not.toHaveLength(0);
    const permits = await Promise.all([first, second]);
    // Only the first waiter ever asked (once, or again after its wake-up subscription was
    // confirmed, on a loaded machine); the second got its permit by hand-over alone.
    expect(rounds.filter((id) => id !== firstWaiter)).toEqual(rounds.slice(0, rounds.indexOf(firstWaiter)));
    expect(permits.map((permit) => permit.slots![0]).sort()).toEqual(held.map((permit) => permit.slots![0]).sort());
    await Promise.all(permits.map((permit) => permit.release()));
  });

  it('sends one caller standing by to ask the masters once none of ours holds or is queued there, not all of them', async () => {
    const { waited, instrumentation } = waitingReports();
    const [a, b] = await Promise.all([engine({ ...FRESH_FLEET, instrumentation }), engine()]);
    // Per round of engine a on master 0, the waiter id it carries.
    const rounds = sharedRoundsOn(a!.clients[0]!);
    const queuedIds = async () => (await a!.redlock.waiters('one-asks')).waiters.map((waiter) => waiter.id);
    const theirs = await Promise.all([0, 1, 2, 3].map(() => b!.redlock.acquire('one-asks', 60_000, { limit: 4 })));
    // Ours waits for one and is woken when it is released: this engine's wake-ups are listening
    // from then on, so a caller queued later sleeps after its one refused round (a fresh engine's
    // caller asks again once its subscription is confirmed, and is not asleep meanwhile).
    const waitingForOurs = a!.redlock.acquire('one-asks', 60_000, { limit: 4, waitTimeoutMs: 100_000 });
    await expect.poll(queuedIds).toHaveLength(1);
    await theirs.pop()!.release();
    const ours = await waitingForOurs;
    const gaveUp = new AbortController();
    const queued = a!.redlock.acquire('one-asks', 60_000, { limit: 4, waitTimeoutMs: 100_000, signal: gaveUp.signal });
    await expect.poll(queuedIds).toHaveLength(1);
    const [queuedId] = await queuedIds();
    // Behind it, three stand by for our holder (no round of theirs), each released as soon as it holds.
    const standingBy = [0, 1, 2].map(() => a!.redlock.acquire('one-asks', 60_000, { limit: 4, waitTimeoutMs: 100_000 }).then((permit) => permit.release()));
    await expect.poll(() => waited).toEqual([true, true, true, true, true]);
    expect(rounds.filter((id) => id !== queuedId && id !== rounds[0])).toEqual([]);
    const before = rounds.length;
    // Our permit leaves the process (still held), and the one of ours queued on the masters gives up.
    const handle = ours.handOver();
    gaveUp.abort();
    await expect(queued).rejects.toThrow();
    // One of them asks, is refused (the four permits are held) and queues; the others stand by
    // behind it. Woken all at once, all three sent a round, in the same tick as the first.
    await expect.poll(async () => (await queuedIds()).filter((id) => id !== queuedId)).toHaveLength(1);
    expect(new Set(rounds.slice(before)).size).toBe(1);
    // The permits come free: every caller standing by gets one, in turn.
    await Promise.all([...theirs.map((permit) => permit.release()), a!.redlock.adopt(handle).then((permit) => permit.release())]);
    await Promise.all(standingBy);
  });

  it('hands no fenced permit over: each holder gets its fence from the masters', async () => {
    const { redlock } = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
    const holds = await contendForPermits(redlock, 'fenced-local', 4, 8);
    expect(holds.filter((hold) => hold.handedOver)).toEqual([]);
  });

  it('extends a permit and signals its loss', async () => {
    const { redlock, clients } = await engine();
    const permit = await redlock.acquire('ext', 5_000, { limit: 4 });
    await permit.extend(20_000);
    expect(permit.remainingMs()).toBeGreaterThan(5_000);
    await Promise.all(clients.slice(0, 2).map((client) => client.del('redlock-holders:ext')));
    await expect(permit.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(permit.signal.aborted).toBe(true);
    await permit.release();
  });

  it('gives every permit a fencing token above those of the permits handed out before it began', async () => {
    const { redlock } = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
    const p1 = await redlock.acquire('fenced-sem', 5_000, { limit: 2 });
    const p2 = await redlock.acquire('fenced-sem', 5_000, { limit: 2 });
    await p1.release();
    const p3 = await redlock.acquire('fenced-sem', 5_000, { limit: 2 });
    // Each began after the one before it was handed its permit: strictly rising (a round retried
    // under load may have raised the counter in between, so not necessarily 1, 2, 3).
    expect(p2.fence!).toBeGreaterThan(p1.fence!);
    expect(p3.fence!).toBeGreaterThan(p2.fence!);
    expect(p3.slots).toEqual(p1.slots); // the next holder of the same slot, with a larger fence
    await Promise.all([p2.release(), p3.release()]);
  });

  it('is all or nothing over several resources', async () => {
    const { redlock, clients } = await engine();
    const full = await Promise.all([1, 2].map(() => redlock.acquire('sb', 10_000, { limit: 2 })));
    expect(await redlock.tryAcquire(['sa', 'sb'], 10_000, { limit: 2 })).toBeNull();
    for (const client of clients) expect(await client.exists('redlock:sa', 'redlock-holders:sa')).toBe(0);
    await full[0]!.release();
    const both = await redlock.tryAcquire(['sa', 'sb'], 10_000, { limit: 2 });
    expect(both?.slots).toHaveLength(2);
    await Promise.all([both!.release(), full[1]!.release()]);
  });

  it('refuses another limit, or another family, on a resource in use: a typed error naming it', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const permit = await a!.redlock.acquire('shape', 10_000, { limit: 3 });
    for (const options of [{ limit: 5 }, { mode: 'read' as const }, {}]) {
      const error = await b!.redlock.acquire('shape', 10_000, { ...options, waitTimeoutMs: 5_000 }).catch((e: unknown) => e);
      // A writer's first try is a plain SET NX that sees only "held"; its next, scripted round sees the kind.
      expect(error).toBeInstanceOf(LockKindMismatchError);
      expect((error as LockKindMismatchError).resource).toBe('shape');
      expect((error as LockKindMismatchError).found).toBe('limit 3');
    }
    await permit.release();
    const writer = await b!.redlock.acquire('shape', 10_000);
    expect(await a!.redlock.acquire('shape', 10_000, { limit: 3, waitTimeoutMs: 5_000 }).catch((e: unknown) => e)).toBeInstanceOf(LockKindMismatchError);
    await writer.release();
    // Inside work holding a permit, another limit is refused at once.
    const nested = await a!.redlock
      .using('shape', 10_000, () => a!.redlock.using('shape', 10_000, async () => 'no', { limit: 2 }), { limit: 3 })
      .catch((e: unknown) => e);
    expect(nested).toBeInstanceOf(LockKindMismatchError);
  });

  it('refuses a limit that is not a whole number from 1, and a read semaphore', async () => {
    const { redlock } = await engine();
    for (const limit of [0, 2.5, -1, Number.NaN]) {
      await expect(redlock.tryAcquire('bad', 5_000, { limit })).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await expect(redlock.tryAcquire('bad', 5_000, { limit: 2, mode: 'read' })).rejects.toBeInstanceOf(InvalidArgumentError);
    const one = await redlock.tryAcquire('bad', 5_000, { limit: 1 });
    expect(one?.limit).toBe(1);
    expect(one?.mode).toBe('write');
    await one!.release();
  });
});
