import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, Redlock } from '../../lib/index.js';
import { LEAVE_SCRIPT } from '../../lib/core/waiting/queue-scripts.js';
import { disconnectAll, keysOn, PATIENT, separateEngine, watchCalls } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

const engine = () => separateEngine(fleet.urls(), opened, PATIENT);

interface Hold {
  engine: number;
  handedOver: boolean;
}

/** Workers of each engine take `resource` in a loop; returns every hold in the order it began. */
async function contend(engines: Redlock[], resource: string, workers: number, cycles: number): Promise<Hold[]> {
  const holds: Hold[] = [];
  let inside = 0;
  await Promise.all(
    engines.flatMap((redlock, index) =>
      Array.from({ length: workers }, async () => {
        for (let i = 0; i < cycles; i++) {
          const lock = await redlock.acquire(resource, 5_000, { waitTimeoutMs: 60_000 });
          inside++;
          expect(inside).toBe(1);
          const hold: Hold = { engine: index, handedOver: false };
          holds.push(hold);
          await sleep(1);
          inside--;
          hold.handedOver = (await lock.release()).handedOver === true;
        }
      }),
    ),
  );
  return holds;
}

describe('hand-over between callers of one process', () => {
  it('passes the held keys straight to the next local waiter, and still releases them in the end', async () => {
    const { redlock, clients } = await engine();
    const holds = await contend([redlock], 'local', 4, 15);
    expect(holds).toHaveLength(60);
    // Most releases find the next caller asleep in line; without hand-over there would be none.
    expect(holds.filter((h) => h.handedOver).length).toBeGreaterThan(20);
    await expect.poll(async () => (await keysOn(clients, 'redlock:*')).flat()).toEqual([]);
  });

  it('hands over at most 8 times in a row, then really releases', async () => {
    const { redlock } = await engine();
    const holds = await contend([redlock], 'streak', 4, 15);
    let streak = 0;
    let longest = 0;
    for (const hold of holds) {
      streak = hold.handedOver ? streak + 1 : 0;
      longest = Math.max(longest, streak);
    }
    expect(longest).toBeLessThanOrEqual(8);
    expect(longest).toBeGreaterThan(0);
  });

  it('keeps other processes served: no process holds the lock for long runs while others wait', async () => {
    const engines = (await Promise.all([engine(), engine(), engine()])).map((e) => e.redlock);
    const holds = await contend(engines, 'shared', 3, 12);
    const perEngine = engines.map((_, i) => holds.filter((h) => h.engine === i).length);
    expect(perEngine).toEqual([36, 36, 36]);
    // The longest run of holds by one engine while the others still had work to do.
    let longest = 0;
    let run = 0;
    let last = -1;
    const left = [...perEngine];
    for (const hold of holds) {
      run = hold.engine === last ? run + 1 : 1;
      last = hold.engine;
      left[hold.engine]!--;
      const othersWaiting = left.some((n, i) => i !== hold.engine && n > 0);
      if (othersWaiting) longest = Math.max(longest, run);
    }
    // One acquire plus at most 8 hand-overs, then a real release serves the masters' queue; the
    // slack covers a moment when no other engine had a waiter enlisted yet. Without the batch
    // limit one engine would keep the lock until its workers ran out (36 holds).
    expect(longest).toBeLessThanOrEqual(9 * 2);
    expect(holds.filter((h) => h.handedOver).length).toBeGreaterThan(0);
  });

  it('does not make a caller who will not wait stand by behind a holder of its own process', async () => {
    const { redlock } = await engine();
    const holder = await redlock.acquire('no-wait', 60_000);
    // Standing by would last the holder's 60 s, far past this test's timeout.
    await expect(redlock.acquire('no-wait', 5_000, { retryCount: 0, waitTimeoutMs: 60_000 })).rejects.toBeInstanceOf(LockHeldError);
    expect(await redlock.tryAcquire('no-wait', 5_000)).toBeNull();
    await holder.release();
  });

  it('never hands over a fenced lock: each holder gets a larger fence', async () => {
    const { redlock } = await engine();
    const fences: number[] = [];
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (let i = 0; i < 5; i++) {
          const lock = await redlock.acquire('fenced-line', 5_000, { fencing: true, waitTimeoutMs: 60_000 });
          fences.push(lock.fence!);
          await sleep(1);
          expect((await lock.release()).handedOver).not.toBe(true);
        }
      }),
    );
    expect(fences).toEqual([...fences].sort((a, b) => a - b));
    expect(new Set(fences).size).toBe(15);
  });
});

describe('queue entries of a waiter that won', () => {
  it('are withdrawn at once from masters that refused it, and only there', async () => {
    const { redlock: holder } = await engine();
    const { redlock, clients } = await engine();
    const leaves = [0, 0, 0];
    clients.forEach((client, index) =>
      watchCalls(client, 'evalsha', (args) => {
        if (args[0] === LEAVE_SCRIPT.sha) leaves[index]++;
      }),
    );
    // Master 0 refuses throughout (another owner holds the key there for 30 s).
    await clients[0]!.set('redlock:split-win', 'someone-else', 'PX', 30_000);
    const first = await holder.acquire('split-win', 30_000);
    // Refused everywhere, the waiter enlists in all three queues; the release wakes it, and it
    // wins on masters 1 and 2, whose grants drop its entry there.
    const waiting = redlock.acquire('split-win', 30_000);
    await expect.poll(() => clients[1]!.hlen('redlock-queue:split-win'), { timeout: 2_000, interval: 10 }).toBe(1);
    await first.release();
    const lock = await waiting;
    expect(await clients[1]!.get('redlock:split-win')).toBe(lock.token);
    // Without the withdrawal master 0's entry would live for the blocking key's 30 s and a second.
    await expect.poll(() => clients[0]!.hlen('redlock-queue:split-win'), { timeout: 1_000, interval: 10 }).toBe(0);
    expect(leaves).toEqual([1, 0, 0]);
    expect(await clients[1]!.hlen('redlock-queue:split-win')).toBe(0);
    await lock.release();
  });

  it('are not withdrawn a second time when their holder hands the lock to the next caller of its process', async () => {
    const { redlock: holder } = await engine();
    // The waiting callers' process: its instrumentation says when a caller waits (stands by).
    let standingBy: () => void = () => {};
    const { redlock, clients } = await separateEngine(fleet.urls(), opened, {
      ...PATIENT,
      instrumentation: { acquireStarted: () => ({ waiting: () => standingBy() }) },
    });
    const leaves = [0, 0, 0];
    clients.forEach((client, index) =>
      watchCalls(client, 'evalsha', (args) => {
        if (args[0] === LEAVE_SCRIPT.sha) leaves[index]++;
      }),
    );
    const first = await holder.acquire('won-then-handed', 30_000);
    // Refused everywhere, this caller enlists in all three queues; the release grants it the lock.
    const waiting = redlock.acquire('won-then-handed', 30_000);
    await expect.poll(() => Promise.all(clients.map((c) => c.hlen('redlock-queue:won-then-handed'))), { timeout: 2_000, interval: 10 }).toEqual([1, 1, 1]);
    await first.release();
    const won = await waiting;
    // The process's next caller stands by for its holder (the first `waiting` report was the enlisted caller's).
    let standBys = 0;
    const next = new Promise<void>((resolve) => {
      standingBy = () => {
        if (++standBys === 1) resolve();
      };
    });
    const second = redlock.acquire('won-then-handed', 30_000);
    await next;
    expect((await won.release()).handedOver).toBe(true);
    const handed = await second;
    expect(handed.token).toBe(won.token);
    await handed.release();
    await expect.poll(() => Promise.all(clients.map((c) => c.hlen('redlock-queue:won-then-handed'))), { timeout: 1_000, interval: 10 }).toEqual([0, 0, 0]);
    await new Promise((resolve) => setImmediate(resolve));
    // The win dropped the entries where the masters granted it (a quorum, at least two of the
    // three); only a master whose grant came after the decision gets a leave, from the win. The
    // hand-over owed none, and used to send one to every master.
    expect(leaves.filter((count) => count === 0).length).toBeGreaterThanOrEqual(2);
  });
});

describe('queue entries of a waiter handed a hold by a caller of its process', () => {
  it('go with the hand-over, not with the new holder’s release', async () => {
    const { redlock: other } = await engine();
    const { redlock, clients } = await engine();
    const queues = () => Promise.all(clients.map((c) => c.hlen('redlock-queue:handed-pool')));
    // Both permits taken: one by another process, one by a caller of this one.
    const foreign = await other.acquire('handed-pool', 30_000, { limit: 2 });
    const mine = await redlock.acquire('handed-pool', 30_000, { limit: 2 });
    // Refused everywhere, the next caller of this process queues on every master and sleeps.
    const waiting = redlock.acquire('handed-pool', 30_000, { limit: 2 });
    await expect.poll(queues, { timeout: 2_000, interval: 10 }).toEqual([1, 1, 1]);
    expect((await mine.release()).handedOver).toBe(true);
    const handed = await waiting;
    // Held all along: its entries would otherwise head each queue for the 30 s wait they were
    // given, named and ignored whenever a permit came free there, refusing everyone behind them.
    await expect.poll(queues, { timeout: 1_000, interval: 10 }).toEqual([0, 0, 0]);
    expect(handed.remainingMs()).toBeGreaterThan(0);
    // So the permit the other process gives back is free for the next caller there at once.
    await foreign.release();
    const next = await other.tryAcquire('handed-pool', 30_000, { limit: 2 });
    expect(next).not.toBeNull();
    await next!.release();
    await handed.release();
  });
});
