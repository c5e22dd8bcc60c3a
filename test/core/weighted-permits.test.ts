import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockUpgradeError, Redlock, type Lock, type RedlockOptions } from '../../lib/index.js';
import { InMemoryRedlock } from '../../lib/testing/index.js';
import { fileFleet } from '../support/file-fleet.js';
import { connectMasters, FRESH_FLEET } from '../support/masters.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// Weighted permits (`permits: n` with `limit`): one hold takes n of the semaphore's slots on a
// majority, all or none, and the checks of the plain permit hold for the sum of weights.

const { fleet: masters, opened } = fileFleet(3, { emptyAfterEach: true });

async function engine(options: RedlockOptions = FRESH_FLEET): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(masters().urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { logger: { warn: () => {} }, ...options });
  await redlock.verifyMasters();
  return { redlock, clients };
}

/** What each master's holders hash says of `token` for `resource`: its slots, or undefined. */
async function slotsOnMasters(clients: readonly Redis[], resource: string, token: string): Promise<(string | undefined)[]> {
  return Promise.all(clients.map(async (client) => (await client.hget(`redlock-holders:${resource}`, token))?.split(' ')[1]));
}

/** On master `index` only, `slots` of `resource` (a semaphore of `limit`) taken by a holder of another process, for a minute. */
async function foreignHolder(client: Redis, resource: string, limit: number, slots: number[]): Promise<void> {
  const [seconds, micros] = (await client.time()) as unknown as [string, string];
  const deadline = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 60_000;
  await client.hset(`redlock-holders:${resource}`, 'foreign', `${deadline} ${slots.join(',')}`);
  await client.pexpire(`redlock-holders:${resource}`, 60_000);
  await client.set(`redlock:${resource}`, `*s${limit}`, 'PX', 60_000);
}

describe('weighted permits (permits: n of a limit)', () => {
  it('takes n distinct slots on every master as one hold, and admits others only to what is left', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const big = await a!.redlock.tryAcquire('pool', 10_000, { limit: 5, permits: 3 });
    expect(big).not.toBeNull();
    expect(big!.permits).toBe(3);
    expect(big!.limit).toBe(5);
    expect(big!.slots).toHaveLength(3);
    expect(new Set(big!.slots).size).toBe(3);
    expect(JSON.parse(JSON.stringify(big))).toMatchObject({ limit: 5, permits: 3, slots: big!.slots });
    // One entry per master, with all three slots.
    expect(await slotsOnMasters(a!.clients, 'pool', big!.token)).toEqual(a!.clients.map(() => big!.slots!.join(',')));

    // 2 of 5 are left: another 3 is refused, all or nothing; a 2 fits.
    expect(await b!.redlock.tryAcquire('pool', 10_000, { limit: 5, permits: 3 })).toBeNull();
    const pair = await c!.redlock.tryAcquire('pool', 10_000, { limit: 5, permits: 2 });
    expect(pair?.slots).toHaveLength(2);
    expect(pair!.slots!.some((slot) => big!.slots!.includes(slot))).toBe(false);
    expect(await b!.redlock.tryAcquire('pool', 10_000, { limit: 5 })).toBeNull();

    const [seen] = await b!.redlock.inspect('pool');
    expect(seen).toMatchObject({ state: 'held', kind: 'permits', limit: 5, holders: 2, used: 5 });

    // Its extension keeps every slot; its release frees them all.
    await big!.extend(20_000);
    expect(await slotsOnMasters(a!.clients, 'pool', big!.token)).toEqual(a!.clients.map(() => big!.slots!.join(',')));
    await big!.release();
    const again = await b!.redlock.tryAcquire('pool', 10_000, { limit: 5, permits: 3 });
    expect(again?.slots).toEqual(big!.slots);
    await Promise.all([again!.release(), pair!.release()]);
  });

  it('is all or nothing over several resources', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const one = await a!.redlock.tryAcquire('left', 10_000, { limit: 3, permits: 2 });
    // `right` is free but `left` has one permit left: a 2 over both gets neither.
    expect(await b!.redlock.tryAcquire(['left', 'right'], 10_000, { limit: 3, permits: 2 })).toBeNull();
    expect(await a!.clients[0]!.exists('redlock:right', 'redlock-holders:right')).toBe(0);
    await one!.release();
    const both = await b!.redlock.tryAcquire(['left', 'right'], 10_000, { limit: 3, permits: 2 });
    expect(both?.slots).toHaveLength(4);
    await both!.release();
  });

  it('serves callers in the order they came: a large request is not overtaken by small ones while it waits', async () => {
    const [a, b, c] = await Promise.all([engine(), engine(), engine()]);
    const held = await Promise.all([1, 2, 3].map(() => a!.redlock.acquire('line', 120_000, { limit: 4 })));
    // 1 of 4 free: the 3 waits in the masters' queue.
    const large = b!.redlock.acquire('line', 60_000, { limit: 4, permits: 3, waitTimeoutMs: 100_000 });
    await expect.poll(() => a!.clients[0]!.hlen('redlock-queue:line'), { timeout: 20_000 }).toBeGreaterThan(0);
    // Free permits a small newcomer would fit in, but the large request came first.
    expect(await c!.redlock.tryAcquire('line', 60_000, { limit: 4 })).toBeNull();
    await held[0]!.release();
    expect(await c!.redlock.tryAcquire('line', 60_000, { limit: 4 })).toBeNull();
    await held[1]!.release();
    const permit = await large;
    expect(permit.slots).toHaveLength(3);
    expect(permit.slots).not.toContain(held[2]!.slots![0]);
    await Promise.all([permit.release(), held[2]!.release()]);
  });

  it('when masters split over which slots, agrees on those free on most of them in a second try', async () => {
    const { clients } = await engine();
    // Each master has another slot taken: alone, they would grant {1,2}, {0,2} and {0,1}. Master 2,
    // slowed down, answers after masters 0 and 1 split the round between them.
    await Promise.all(clients.map((client, index) => foreignHolder(client, 'split', 4, [index])));
    const slow = await TcpProxy.start({ host: '127.0.0.1', port: masters().nodes[2]!.port });
    try {
      slow.setLatency(100);
      const proxied = await connectMasters(masters().urls().map((url, index) => (index === 2 ? slow.url : url)));
      opened.push(...proxied);
      const redlock = new Redlock(proxied, { ...FRESH_FLEET, nodeTimeoutMs: 2_000, logger: { warn: () => {} } });
      await redlock.verifyMasters();
      const permit = await redlock.tryAcquire('split', 60_000, { limit: 4, permits: 2 });
      // Free on masters 0 and 1: 2 and 3 on both, 0 and 1 on one each.
      expect(permit?.slots).toEqual([2, 3]);
      await proxied[2]!.ping(); // behind both tries on master 2's connection
      // Master 2 held the first try's {0,1} when the second came, so refused it; the first try's entry is then cleaned up.
      await expect.poll(() => slotsOnMasters(clients, 'split', permit!.token)).toEqual(['2,3', '2,3', undefined]);
      await permit!.release();
    } finally {
      await slow.close();
    }
  });

  it('never lets more weight in than the limit among many callers of mixed weights, and hands a hold over only to a caller of its weight', async () => {
    const engines = await Promise.all([1, 2, 3].map(() => engine()));
    let inside = 0;
    let mostInside = 0;
    let handedOver = 0;
    const wrongWeight: string[] = [];
    await Promise.all(
      engines.flatMap(({ redlock }) =>
        [1, 2, 3, 1, 2].map(async (permits) => {
          for (let i = 0; i < 4; i++) {
            const hold: Lock = await redlock.acquire('mixed', 10_000, { limit: 4, permits, waitTimeoutMs: 60_000 });
            inside += permits;
            mostInside = Math.max(mostInside, inside);
            if (hold.permits !== permits || hold.slots?.length !== permits) wrongWeight.push(`${permits} got ${hold.slots?.length}`);
            await sleep(2);
            inside -= permits;
            if ((await hold.release()).handedOver) handedOver++;
          }
        }),
      ),
    );
    expect(mostInside).toBeLessThanOrEqual(4);
    expect(mostInside).toBeGreaterThan(1);
    expect(wrongWeight).toEqual([]);
    // Two callers of each engine share each of the weights 1 and 2: some holds pass between them.
    expect(handedOver).toBeGreaterThan(0);
  });

  it('is handed to another process with its weight and slots, which extends and releases all of them', async () => {
    const [a, b] = await Promise.all([engine(), engine()]);
    const permit = await a!.redlock.acquire('handed', 10_000, { limit: 4, permits: 3, fencing: true });
    const adopted = await b!.redlock.adopt(permit.handOver());
    expect(adopted.permits).toBe(3);
    expect(adopted.slots).toEqual(permit.slots);
    expect(adopted.fence).toBe(permit.fence);
    await adopted.extend(20_000);
    expect(await b!.redlock.tryAcquire('handed', 10_000, { limit: 4, permits: 2 })).toBeNull();
    await adopted.release();
    const next = await b!.redlock.tryAcquire('handed', 10_000, { limit: 4, permits: 4 });
    expect(next?.slots).toEqual([0, 1, 2, 3]);
    await next!.release();
  });

  it('refuses a weight that is not a whole number from 1 to the limit, naming it', async () => {
    const { redlock } = await engine();
    for (const [permits, limit] of [
      [0, 4],
      [1.5, 4],
      [5, 4],
      ['2', 4],
      [2, undefined],
    ] as const) {
      const call = redlock.tryAcquire('bad', 1_000, { limit, permits } as never);
      await expect(call).rejects.toThrow(InvalidArgumentError);
      await expect(call).rejects.toThrow(/permits/);
    }
    // A weight of 1 is a plain permit, and of a plain lock, the lock.
    const plain = await redlock.tryAcquire('plain', 1_000, { permits: 1 });
    expect(plain?.limit).toBe(1);
    await plain!.release();
  });

  it('runs a permit asked for inside a hold of as many or more under it, and refuses one of more permits (it could deadlock)', async () => {
    const { redlock } = await engine();
    const inner = await redlock.using(
      'nested',
      10_000,
      async (_signal, outer) => {
        const same = await redlock.using('nested', 10_000, async (_s, lock) => lock === outer, { limit: 4, permits: 2 });
        const fewer = await redlock.using('nested', 10_000, async (_s, lock) => lock === outer, { limit: 4 });
        const more = redlock.using('nested', 10_000, async () => 'ran', { limit: 4, permits: 3 });
        await expect(more).rejects.toThrow(LockUpgradeError);
        await expect(more).rejects.toThrow('3 permits of limit 4 on nested asked for inside a hold of 2 of them');
        return { same, fewer };
      },
      { limit: 4, permits: 2 },
    );
    expect(inner).toEqual({ same: true, fewer: true });
  });

  it('works alike on the in-memory engine', async () => {
    const memory = new InMemoryRedlock();
    const big = await memory.tryAcquire('pool', 10_000, { limit: 5, permits: 3 });
    expect(big?.slots).toEqual([0, 1, 2]);
    expect(await memory.tryAcquire('pool', 10_000, { limit: 5, permits: 3 })).toBeNull();
    const pair = await memory.tryAcquire('pool', 10_000, { limit: 5, permits: 2 });
    expect(pair?.slots).toEqual([3, 4]);
    const [seen] = await memory.inspect('pool');
    expect(seen).toMatchObject({ state: 'held', kind: 'permits', limit: 5, holders: 2, used: 5 });
    await big!.extend(20_000);
    await big!.release();
    const again = await memory.tryAcquire('pool', 10_000, { limit: 5, permits: 3 });
    expect(again?.slots).toEqual([0, 1, 2]);
    await Promise.all([again!.release(), pair!.release()]);
    await memory.releaseAll();
  });
});
