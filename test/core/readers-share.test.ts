import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError, Redlock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, sharedAcquireWaiters, sharedRoundsOn, watchCalls } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// Readers of one process share a read hold on the masters (ReadersHere): a reader that asks
// while another reader of its process holds joins that hold, without a round.

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

/** An engine with connections of its own: another process, as far as the masters can tell. */
async function engine(options: RedlockOptions = FRESH_FLEET): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { logger: { warn: () => {} }, ...options });
  await redlock.verifyMasters();
  return { redlock, clients };
}

/** Per master, the read holds it keeps on `resource`: token → its deadline there (master ms). */
async function holdsOn(clients: readonly Redis[], resource: string): Promise<Map<string, number>[]> {
  return Promise.all(
    clients.map(async (client) => {
      const entries = await client.hgetall(`redlock-holders:${resource}`);
      return new Map(Object.entries(entries).map(([token, value]) => [token, Number(value.split(' ')[0])]));
    }),
  );
}

/**
 * Polls until every master keeps `count` read holds on `resource`: a round settles at a quorum,
 * and the last master may apply it later.
 */
async function untilHolds(clients: readonly Redis[], resource: string, count: number): Promise<void> {
  await expect.poll(async () => (await holdsOn(clients, resource)).map((holds) => holds.size)).toEqual(clients.map(() => count));
}

/**
 * Polls until every master keeps the one read hold on `resource` for at least `ms` more, on its
 * own clock (an extension settles at a quorum: the last master may apply it later).
 */
async function untilHeldFor(clients: readonly Redis[], resource: string, ms: number): Promise<void> {
  await expect
    .poll(async () => {
      const [holds, now] = await Promise.all([holdsOn(clients, resource), Promise.all(clients.map(masterNow))]);
      return holds.every((held, index) => held.size === 1 && [...held.values()][0]! - now[index]! >= ms);
    })
    .toBe(true);
}

/** A master's clock (ms), as the scripts read it. */
async function masterNow(client: Redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe('readers of one process share a read hold', () => {
  it('a reader joins the hold another reader of its process holds, which leaves the masters with the last of them', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const rounds = sharedRoundsOn(a.clients[0]!);
    const first = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
    const second = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
    // One acquire round went to the masters, for the first; the second shares its token.
    expect(rounds).toHaveLength(1);
    expect(second.rounds).toEqual([]);
    // Valid no longer than the hold it shares (read after it: the same deadline shows less).
    const firstLeft = first.remainingMs();
    expect(second.remainingMs()).toBeGreaterThan(0);
    expect(second.remainingMs()).toBeLessThanOrEqual(firstLeft + 1);
    await untilHolds(a.clients, 'doc', 1);

    // The first lets go: the second still reads, so the masters keep the hold and refuse writers.
    const firstReleased = await first.release();
    expect(firstReleased.handedOver).toBe(true);
    expect(firstReleased.nodes).toEqual([]);
    for (const holds of await holdsOn(a.clients, 'doc')) expect(holds.size).toBe(1);
    expect(await b.redlock.tryAcquire('doc', 10_000)).toBeNull();

    const secondReleased = await second.release();
    expect(secondReleased.heldUntilRelease).toBe(true);
    expect(secondReleased.releasedOn).toBeGreaterThanOrEqual(2);
    // Freed on a majority when the release answered: another process's writer gets in.
    const writer = await b.redlock.tryAcquire('doc', 10_000);
    expect(writer).not.toBeNull();
    await writer!.release();
  });

  it('readers asking at once send one round: the others wait for it and join the hold it wins', async () => {
    const { redlock, clients } = await engine();
    const rounds = sharedRoundsOn(clients[0]!);
    const readers = await Promise.all([0, 1, 2, 3].map(() => redlock.acquire('doc', 10_000, { mode: 'read' })));
    expect(rounds).toHaveLength(1);
    expect(new Set(readers.map((reader) => reader.token)).size).toBe(1);
    expect(readers.filter((reader) => reader.rounds.length === 0)).toHaveLength(3);
    await untilHolds(clients, 'doc', 1);
    await Promise.all(readers.map((reader) => reader.release()));
    await untilHolds(clients, 'doc', 0);
  });

  it('when that round is refused, each of the others asks for itself, at once and once', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const writer = await b.redlock.acquire('doc', 10_000);
    // Which turn of the event loop each shared acquire request left in.
    let turn = 0;
    let spinning = true;
    const spin = () => {
      turn++;
      if (spinning) setImmediate(spin);
    };
    spin();
    const sentIn: number[] = [];
    watchCalls(a.clients[0]!, 'evalsha', (args) => {
      for (const _ of sharedAcquireWaiters(args)) sentIn.push(turn);
    });
    const tries = await Promise.all([0, 1, 2].map(() => a.redlock.tryAcquire('doc', 10_000, { mode: 'read' })));
    spinning = false;
    expect(tries).toEqual([null, null, null]);
    // The first round, then the two that waited for it, sent together once it was refused.
    expect(sentIn).toHaveLength(3);
    expect(sentIn[1]).toBeGreaterThan(sentIn[0]!);
    expect(sentIn[2]).toBe(sentIn[1]);
    await writer.release();
  });

  it('readers asking at once behind a writer: one round, and the others stand by for the reader it queued, then join the hold it wins', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const writer = await b.redlock.acquire('doc', 60_000);
    const rounds = sharedRoundsOn(a.clients[0]!);
    const readers = [0, 1, 2, 3].map(() => a.redlock.acquire('doc', 60_000, { mode: 'read', waitTimeoutMs: 30_000 }));
    // The first's round queued it on every master; nobody else of its process is there.
    await expect.poll(() => Promise.all(a.clients.map((client) => client.hlen('redlock-queue:doc')))).toEqual([1, 1, 1]);
    const firstId = rounds[0];
    await writer.release();
    const held = await Promise.all(readers);
    // Every round on the masters was the first's: the others joined what its last one won.
    expect(rounds.filter((id) => id !== firstId)).toEqual([]);
    expect(new Set(held.map((reader) => reader.token)).size).toBe(1);
    expect(held.filter((reader) => reader.rounds.length === 0)).toHaveLength(3);
    await Promise.all(held.map((reader) => reader.release()));
  });

  it('takes joiners while one of its readers holds it, and none once none does', async () => {
    const { redlock, clients } = await engine();
    const first = await redlock.acquire('doc', 10_000, { mode: 'read' });
    const second = await redlock.acquire('doc', 10_000, { mode: 'read' });
    await first.release();
    // The founder let go, the second still holds: a new reader joins it.
    const third = await redlock.acquire('doc', 10_000, { mode: 'read' });
    expect(third.rounds).toEqual([]);
    await Promise.all([second.release(), third.release()]);
    await untilHolds(clients, 'doc', 0);
    // Nobody holds it: the next reader asks the masters.
    const fourth = await redlock.acquire('doc', 10_000, { mode: 'read' });
    expect(fourth.rounds).not.toEqual([]);
    await fourth.release();
  });

  it('gives a joiner no more than the ttl it asked for', async () => {
    const { redlock } = await engine();
    const first = await redlock.acquire('doc', 20_000, { mode: 'read' });
    const second = await redlock.acquire('doc', 2_000, { mode: 'read' });
    expect(second.rounds).toEqual([]);
    expect(second.remainingMs()).toBeLessThanOrEqual(2_000);
    await Promise.all([first.release(), second.release()]);
  });

  it('never joins for a fenced reader, nor a reader asking twice the ttl left', async () => {
    const { redlock, clients } = await engine();
    const first = await redlock.acquire('doc', 2_000, { mode: 'read' });
    const fenced = await redlock.acquire('doc', 2_000, { mode: 'read', fencing: true });
    const longer = await redlock.acquire('doc', 10_000, { mode: 'read' });
    expect(fenced.fence).toBeGreaterThan(0);
    await untilHolds(clients, 'doc', 3);
    await Promise.all([first.release(), fenced.release(), longer.release()]);
  });

  it('an extension by one reader never shortens the hold under another: it asks for what the others rely on', async () => {
    const { redlock, clients } = await engine();
    const first = await redlock.acquire('doc', 20_000, { mode: 'read' });
    const second = await redlock.acquire('doc', 20_000, { mode: 'read' });
    await second.extend(1_000);
    expect(second.remainingMs()).toBeLessThanOrEqual(1_000);
    // Asked for 1 s alone, the masters would drop the hold under the first in a second.
    await untilHeldFor(clients, 'doc', first.remainingMs() - 1_000);
    await Promise.all([first.release(), second.release()]);
  });

  it('an extension for the others asks for their time and its drift margin, as their own rounds did', async () => {
    const { redlock, clients } = await engine();
    const first = await redlock.acquire('doc', 60_000, { mode: 'read' });
    const second = await redlock.acquire('doc', 60_000, { mode: 'read' });
    await second.extend(1_000);
    // The first counted its deadline 1% of 60 s (600 ms) before the masters' expiry; the hold's
    // new expiry must keep that margin, not end when the first's deadline does.
    await untilHeldFor(clients, 'doc', first.remainingMs() + 300);
    await Promise.all([first.release(), second.release()]);
  });

  it("an extension counts on the hold's extensions sent before it: a shorter one never lands after a longer one", async () => {
    const { redlock, clients } = await engine();
    const first = await redlock.acquire('doc', 2_000, { mode: 'read' });
    const second = await redlock.acquire('doc', 2_000, { mode: 'read' });
    // Asked at once: the second (1 s, or what the first relied on before its extension's answer
    // was read) would land after the first's 20 s on every master.
    await Promise.all([first.extend(20_000), second.extend(1_000)]);
    expect(first.remainingMs()).toBeGreaterThan(15_000);
    await untilHeldFor(clients, 'doc', first.remainingMs() - 1_000);
    await Promise.all([first.release(), second.release()]);
  });

  it('refuses to hand over a reader whose hold others of its process share, and hands over the last', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const first = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
    const second = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
    expect(() => second.handOver()).toThrow(LockLostError);
    // Refused: still held, and released as usual.
    expect(second.released).toBe(false);
    expect(second.remainingMs()).toBeGreaterThan(0);
    await first.release();
    const handle = second.handOver();
    const adopted = await b.redlock.adopt(handle);
    expect(adopted.mode).toBe('read');
    // Released by the process it went to: the masters are free.
    await adopted.release();
    await untilHolds(a.clients, 'doc', 0);
  });

  it('keeps a writer waiting no longer than the founder and 8 readers joining after it: later readers queue behind it', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    let holder = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
    const order: string[] = [];
    const writer = b.redlock.acquire('doc', 10_000).then((lock) => {
      order.push('writer');
      return lock;
    });
    // Queued on every master: a writer's entry there is what refuses later readers.
    await expect.poll(async () => (await Promise.all(a.clients.map((client) => client.hlen('redlock-queue:doc')))).every((count) => count > 0)).toBe(true);
    // A chain of readers, each joining while the one before holds: it would keep the writer out for ever.
    for (let joins = 0; joins < 8; joins++) {
      const joiner = await a.redlock.acquire('doc', 10_000, { mode: 'read' });
      expect(joiner.rounds).toEqual([]);
      await holder.release();
      holder = joiner;
    }
    const later = a.redlock.acquire('doc', 10_000, { mode: 'read' }).then((lock) => {
      order.push('later reader');
      return lock;
    });
    await holder.release();
    const written = await writer;
    expect(order).toEqual(['writer']);
    await written.release();
    const read = await later;
    expect(order).toEqual(['writer', 'later reader']);
    await read.release();
  });
});
