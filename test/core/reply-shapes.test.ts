import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock, RedlockError } from '../../lib/index.js';
import { freedPerKey, interpretAcquire, interpretTake, takesPerKey } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { grantedIfOne, grantedIfPositive, UnexpectedReplyError } from '../../lib/core/scripts/replies.js';
import { runRound } from '../../lib/core/rounds/quorum-round.js';
import type { RedisNode } from '../../lib/core/voters/redis-node.js';
import { FakeMaster, randomReply } from '../support/fake-master.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// A reply of the wrong shape is that master's error in the round: never a crash of the process,
// never a vote. Real masters A and B with a misbehaving third: locks work through A and B.

let fleet: RedisFleet;
const opened: Redis[] = [];
const fakes: FakeMaster[] = [];
let unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  fleet = await RedisFleet.start(2);
});

beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', onUnhandled);
  process.on('uncaughtException', onUnhandled);
});

afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
  process.off('uncaughtException', onUnhandled);
});

afterAll(async () => {
  disconnectAll(opened);
  await Promise.all(fakes.map((fake) => fake.close()));
  await fleet?.stopAll();
});

async function engineWith(fake: FakeMaster, options: { autoPipelining?: boolean } = {}): Promise<Redlock> {
  const clients = await connectMasters([...fleet.urls(), fake.url], { enableAutoPipelining: options.autoPipelining ?? false });
  opened.push(...clients);
  return new Redlock(clients, { ...FRESH_FLEET, nodeTimeoutMs: 1_000, logger: { warn: () => {} } });
}

/** Lets every reply that is on its way land, and whatever it would throw be thrown. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe('a master that answers :1 to every command', () => {
  it('is an error in each round while the others grant, acquire, extend and release', async () => {
    const fake = await FakeMaster.start();
    fakes.push(fake);
    const redlock = await engineWith(fake);
    const plain = await redlock.acquire('one', 5_000);
    const fenced = await redlock.acquire('two', 5_000, { fencing: true });
    const several = await redlock.acquire(['three', 'four'], 5_000);
    const batched = await Promise.all(['b1', 'b2', 'b3'].map((resource) => redlock.tryAcquire(resource, 5_000)));
    for (const lock of [plain, fenced, several, ...batched]) {
      expect(lock?.remainingMs()).toBeGreaterThan(0);
      await lock!.extend(5_000);
      const released = await lock!.release();
      expect(released.heldUntilRelease).toBe(true);
    }
    await settle();
    expect(unhandled).toEqual([]);
    expect(fake.commands.some(([name]) => /^(evalsha|eval|set)$/i.test(name!))).toBe(true);
  });

  it('names the reply shape in the outcome, and two such masters leave no quorum', async () => {
    const first = await FakeMaster.start();
    const second = await FakeMaster.start();
    fakes.push(first, second);
    const clients = await connectMasters([fleet.urls()[0]!, first.url, second.url]);
    opened.push(...clients);
    const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} } });
    const error = await redlock.acquire('nobody', 5_000, { fencing: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const outcomes = (error as QuorumUnreachableError).nodes;
    expect(outcomes[1]).toMatchObject({ status: 'error', error: 'unexpected reply to acquire: an integer' });
    expect(outcomes[2]).toMatchObject({ status: 'error' });
    await settle();
    expect(unhandled).toEqual([]);
  });
});

describe('replies of every RESP type', () => {
  it('from a master answering at random never crash the client nor break a quorum of real masters', async () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const fake = await FakeMaster.start(() => randomReply(random));
    fakes.push(fake);
    for (const autoPipelining of [false, true]) {
      const redlock = await engineWith(fake, { autoPipelining });
      for (let round = 0; round < 40; round++) {
        const locks = await Promise.all([
          redlock.acquire(`fuzz-${round}`, 5_000),
          redlock.acquire(`fuzz-fenced-${round}`, 5_000, { fencing: true }),
          redlock.acquire([`fuzz-a-${round}`, `fuzz-b-${round}`], 5_000),
          redlock.tryAcquire(`fuzz-try-${round}`, 5_000),
        ]);
        for (const lock of locks) {
          expect(lock).not.toBeNull();
          await lock!.extend(5_000).catch((error: unknown) => expect(error).toBeInstanceOf(RedlockError));
        }
        await Promise.all(locks.map((lock) => lock!.release()));
      }
    }
    await settle();
    expect(unhandled).toEqual([]);
  });

  it('are read as a vote or refused with UnexpectedReplyError by every reader', () => {
    let seed = 11;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const readers = [
      interpretAcquire,
      interpretTake,
      grantedIfOne,
      grantedIfPositive,
      (reply: unknown) => ({ granted: freedPerKey(reply, 2).length === 2 }),
      (reply: unknown) => ({ granted: takesPerKey(reply, 2).length === 2 }),
    ];
    for (let i = 0; i < 5_000; i++) {
      const reply = decoded(random);
      for (const read of readers) {
        let vote: { granted: boolean } | undefined;
        try {
          vote = read(reply);
        } catch (error) {
          expect(error).toBeInstanceOf(UnexpectedReplyError);
          continue;
        }
        expect(typeof vote.granted).toBe('boolean');
      }
    }
    // The shapes the scripts return are read, not refused.
    expect(interpretAcquire([1, 17])).toEqual({ granted: true, value: 17 });
    expect(interpretAcquire([0, -2])).toEqual({ granted: false, value: -2 });
    expect(interpretTake('taken')).toEqual({ granted: true });
    expect(interpretTake(1200)).toEqual({ granted: false, value: 1200 });
    expect(grantedIfOne(1)).toEqual({ granted: true });
    expect(grantedIfPositive(2)).toEqual({ granted: true });
    // And near misses are refused rather than read as a vote.
    for (const [read, reply] of [
      [interpretAcquire, 1],
      [interpretAcquire, [1]],
      [interpretAcquire, ['1', '0']],
      [interpretAcquire, [2, 0]],
      [interpretTake, 'OK'],
      [interpretTake, null],
      [grantedIfOne, '1'],
      [grantedIfOne, [1]],
      [grantedIfPositive, -1],
      [grantedIfPositive, 'x'],
    ] as const) {
      expect(() => (read as (reply: unknown) => unknown)(reply)).toThrow(UnexpectedReplyError);
    }
  });

  it('that a reader cannot read, or a request that throws at once, settle the round as that node\'s error', async () => {
    const nodes = ['a:1', 'b:2', 'c:3'].map((name) => ({ name }) as RedisNode);
    const round = await runRound(
      nodes,
      { quorum: 2, timeoutMs: 1_000 },
      (_node, index) => {
        if (index === 2) throw new Error('thrown while sending');
        return Promise.resolve(index === 0 ? [1, 0] : 'not a reply');
      },
      interpretAcquire,
    );
    expect(round.outcomes.map((o) => o.status)).toEqual(['granted', 'error', 'error']);
    expect(round.outcomes[1]!.error).toBe('unexpected reply to acquire: string');
    expect(round.outcomes[2]!.error).toBe('thrown while sending');
  });
});

/** A value as ioredis decodes a reply: numbers, strings, Buffers, nil, errors in arrays, RESP3 types, arrays. */
function decoded(random: () => number, depth = 0): unknown {
  const pick = Math.floor(random() * (depth < 2 ? 9 : 7));
  switch (pick) {
    case 0:
      return [0, 1, -1, -2, 2, 2 ** 53, -(2 ** 40), 1.5][Math.floor(random() * 8)];
    case 1:
      return ['OK', 'taken', '1', '', 'QUEUED'][Math.floor(random() * 5)];
    case 2:
      return Buffer.from([Math.floor(random() * 256)]);
    case 3:
      return null;
    case 4:
      return new Error('ERR nested');
    case 5:
      return Math.floor(random() * 2);
    case 6:
      // RESP3: booleans, doubles, big numbers, maps.
      return [true, false, Number.NaN, Number.POSITIVE_INFINITY, 10n ** 30n, { taken: 1 }, new Map([[1, 1]])][Math.floor(random() * 7)];
    default:
      return Array.from({ length: Math.floor(random() * 4) }, () => decoded(random, depth + 1));
  }
}
