import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, MAX_TTL_MS, QuorumUnreachableError, Redlock } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
let clients: Redis[];
let redlock: Redlock;
const extra: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  clients = await connectMasters(fleet.urls());
  redlock = new Redlock(clients, FRESH_FLEET);
});

afterAll(async () => {
  disconnectAll([...(clients ?? []), ...extra]);
  await fleet?.stopAll();
});

function invalid(argument: string) {
  return (error: unknown) => {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).code).toBe('INVALID_ARGUMENT');
    expect((error as InvalidArgumentError).argument).toBe(argument);
    return true;
  };
}

describe('ttl', () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, MAX_TTL_MS + 1, '1000', undefined])(
    'rejects %s with a typed error naming ttlMs',
    async (ttl) => {
      const error = await redlock.acquire('ttl', ttl as number).catch((e) => e);
      expect(invalid('ttlMs')(error)).toBe(true);
      expect(error.message).toContain('ttlMs');
      await expect(redlock.using('ttl', ttl as number, async () => 1)).rejects.toBeInstanceOf(InvalidArgumentError);
    },
  );

  it('rejects a bad ttl on extend without touching the lock', async () => {
    const lock = await redlock.acquire('extend-ttl', 5_000);
    try {
      await expect(lock.extend(0)).rejects.toSatisfy(invalid('ttlMs'));
      expect(lock.remainingMs()).toBeGreaterThan(0);
      // The acquire settled at a quorum: a master may still be applying it (a loaded machine).
      await expect.poll(() => Promise.all(clients.map((c) => c.get('redlock:extend-ttl')))).toEqual([lock.token, lock.token, lock.token]);
    } finally {
      // Else every later test here finds this lock still held.
      await lock.release();
    }
  });
});

describe('resources', () => {
  it.each([[''], [[]], [['']], [['a', '']], [[5]], [null], [undefined]])('rejects %j', async (resources) => {
    const error = await redlock.acquire(resources as string, 1_000).catch((e) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.message).toMatch(/resource/);
  });

  it('names the empty value it refused', async () => {
    const error = await redlock.acquire('', 1_000).catch((e) => e);
    expect(error.message).toContain('""');
  });
});

describe('masters', () => {
  it('needs at least one', () => {
    expect(() => new Redlock([])).toThrow(/clients.*at least one/);
  });

  it('refuses the same client twice', () => {
    expect(() => new Redlock([clients[0]!, clients[1]!, clients[0]!])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'clients[2]' }),
    );
  });

  it('refuses two clients to one address: two databases of one server are not independent', () => {
    const sameServer = new Redis(fleet.urls()[0]! + '/3', { lazyConnect: true });
    extra.push(sameServer);
    expect(() => new Redlock([clients[0]!, sameServer])).toThrow(/clients\[1\].*same address as clients\[0\]/);
  });

  it('refuses something that is not an ioredis client', () => {
    expect(() => new Redlock([{} as Redis])).toThrow(/clients\[0\]/);
  });

  it('warns about an even count, and still works', async () => {
    const warnings: string[] = [];
    const even = new Redlock(clients.slice(0, 2), { ...FRESH_FLEET, logger: { warn: (m) => warnings.push(m) } });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/2 masters is an even count/);
    expect(even.quorum).toBe(2);
    await (await even.acquire('even', 1_000)).release();
  });

  it('rejects bad engine options by name', () => {
    expect(() => new Redlock(clients, { ...FRESH_FLEET, driftFactor: 2 })).toThrow(expect.objectContaining({ argument: 'driftFactor' }));
    expect(() => new Redlock(clients, { ...FRESH_FLEET, nodeTimeoutMs: 0 })).toThrow(expect.objectContaining({ argument: 'nodeTimeoutMs' }));
    expect(() => new Redlock(clients, { ...FRESH_FLEET, retryCount: -1 })).toThrow(expect.objectContaining({ argument: 'retryCount' }));
    expect(() => new Redlock(clients, { ...FRESH_FLEET, maxExtensions: 1.5 })).toThrow(expect.objectContaining({ argument: 'maxExtensions' }));
  });

  it('refuses waits longer than a timer can measure, which would otherwise end after 1 ms', async () => {
    // 2^31 ms (about 25 days): Node would fire such a timer at once, and a waiter behind a
    // caller of this process would give up immediately instead of waiting.
    expect(() => new Redlock(clients, { ...FRESH_FLEET, waitTimeoutMs: 2 ** 31 })).toThrow(expect.objectContaining({ argument: 'waitTimeoutMs' }));
    const error = await redlock.acquire('delay', 1_000, { retryDelayMs: 2 ** 31 }).catch((e) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.argument).toBe('retryDelayMs');
    expect(await redlock.acquire('delay', 1_000, { waitTimeoutMs: 2 ** 31 - 1 }).then((lock) => lock.release())).toMatchObject({ heldUntilRelease: true });
  });
});

describe('engine options', () => {
  it.each<[string, unknown]>([
    ['options', null],
    ['options', 'fast'],
    ['logger', {}],
    ['driftFactor', '0.1'],
    ['fencing', 'yes'],
    ['wakeups', 1],
    ['fenceTimeFloor', 'false'],
    ['restartQuarantineMs', -5],
    ['restartQuarantineMs', '10000'],
    ['restartQuarantineMs', true],
    // Left out is the default; null is a value, and not one of the type asked for.
    ['keyPrefix', null],
    ['fencing', null],
    ['logger', null],
    ['retryCount', null],
    ['maxExtensions', null],
    ['restartQuarantineMs', null],
    // A node timeout longer than a timer can wait would time every master out after 1 ms.
    ['nodeTimeoutMs', 2 ** 31],
  ])('%s: %j is refused with a typed error naming it', (argument, value) => {
    const options = argument === 'options' ? value : { ...FRESH_FLEET, [argument]: value };
    expect(() => new Redlock(clients, options as object)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument }));
  });

  it.each<[string, Record<string, string>]>([
    ['keyPrefix', { keyPrefix: '' }],
    ['keyPrefix', { keyPrefix: 'redlock' }],
    ['keyPrefix', { keyPrefix: 'r' }],
    ['queueKeyPrefix', { queueKeyPrefix: 'redlock:' }],
    ['fenceKeyPrefix', { fenceKeyPrefix: 'redlock:fence:' }],
    ['keyPrefix', { keyPrefix: 'locks:', queueKeyPrefix: 'locks:queue:' }],
    ['keyPrefix', { keyPrefix: 'redlock-wake:' }],
  ])('refuses prefixes that can collide: %s in %j', (argument, prefixes) => {
    expect(() => new Redlock(clients, { ...FRESH_FLEET, ...prefixes })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', argument, message: expect.stringMatching(/no prefix may begin another/) }),
    );
  });

  it('accepts prefixes that cannot collide', async () => {
    const engine = new Redlock(clients, { ...FRESH_FLEET, keyPrefix: 'app:lock:', queueKeyPrefix: 'app:queue:', fenceKeyPrefix: 'app:fence:' });
    await (await engine.acquire('x', 1_000)).release();
  });
});

describe('per-call options', () => {
  const callsWith = (options: object) => [
    () => redlock.acquire('per-call', 1_000, options),
    () => redlock.tryAcquire('per-call', 1_000, options),
    () => redlock.using('per-call', 1_000, async () => 'ran', options),
    () => redlock.enter('per-call', 1_000, options),
  ];

  it.each<[string, Record<string, unknown>, string]>([
    ['fencing', { fencing: 'false' }, '"false" (expected true or false)'],
    ['fencing', { fencing: 0 }, '0 (expected true or false)'],
    ['fencing', { fencing: null }, 'null (expected true or false)'],
    ['autoExtend', { autoExtend: 'no' }, '"no" (expected true or false)'],
    ['mode', { mode: 'READ' }, `"READ" (expected 'read' or 'write')`],
    ['mode', { mode: null }, `null (expected 'read' or 'write')`],
    ['limit', { limit: '2' }, '"2" (expected a whole number'],
    ['retryCount', { retryCount: '3' }, '"3" (expected a non-negative integer or Infinity)'],
    ['retryCount', { retryCount: null }, 'null (expected a non-negative integer or Infinity)'],
    ['waitTimeoutMs', { waitTimeoutMs: '100' }, '"100" (expected a number of ms'],
    ['retryDelayMs', { retryDelayMs: null }, 'null (expected a number of ms'],
    ['retryJitterMs', { retryJitterMs: {} }, 'object (expected a number of ms'],
  ])('%s in %j is refused by every call before anything is taken, naming the option, the value and what was expected', async (argument, options, shown) => {
    for (const call of callsWith(options)) {
      const error = await call().catch((e: unknown) => e);
      expect(invalid(argument)(error)).toBe(true);
      expect((error as Error).message).toContain(`invalid ${argument}: ${shown}`);
    }
    expect(redlock.heldLocks.size).toBe(0);
    for (const client of clients) expect(await client.exists('redlock:per-call', 'redlock-fence:per-call')).toBe(0);
  });

  it('a reentrant call, which acquires nothing, still refuses options of the wrong type', async () => {
    const refused = await redlock.using('per-call-outer', 1_000, async () => {
      const errors = [];
      for (const options of [{ retryCount: 'x' }, { autoExtend: 'no' }, { fencing: 'yes' }]) {
        errors.push(await redlock.using('per-call-outer', 1_000, async () => 'ran', options as object).catch((e: unknown) => e));
      }
      return errors;
    });
    expect(refused.map((error) => (error as InvalidArgumentError).argument)).toEqual(['retryCount', 'autoExtend', 'fencing']);
  });

  it.each<[string, unknown]>([
    ['a string', 'fenced'],
    ['null', null],
    ['an array', [true]],
  ])('tryAcquire options that are %s are refused, not spread into options', async (_name, options) => {
    const error = await redlock.tryAcquire('per-call', 1_000, options as object).catch((e: unknown) => e);
    expect(invalid('options')(error)).toBe(true);
    for (const client of clients) expect(await client.exists('redlock:per-call')).toBe(0);
  });
});

describe('checkMasters', () => {
  it.each<[unknown]>([['500'], [0], [-1], [2 ** 31], [Number.NaN]])('refuses a PING timeout of %s, which a timer would not wait out', async (timeoutMs) => {
    await expect(redlock.checkMasters(timeoutMs as number)).rejects.toSatisfy(invalid('timeoutMs'));
  });
});

describe('signal', () => {
  it.each<[string, unknown]>([
    ['a plain object', { aborted: false }],
    ['a string', 'abort'],
    ['null', null],
    ['an AbortController', new AbortController()],
  ])('that is %s is refused with INVALID_ARGUMENT, and nothing fails later', async (_name, signal) => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('uncaughtException', record).on('unhandledRejection', record);
    try {
      for (const call of [
        () => redlock.acquire('signal', 1_000, { signal: signal as AbortSignal }),
        () => redlock.using('signal', 1_000, async () => 'ran', { signal: signal as AbortSignal }),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(invalid('signal')(error)).toBe(true);
      }
      // A timer of a waiter given such a signal would have thrown by now.
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(unhandled).toEqual([]);
      expect(await clients[0]!.exists('redlock:signal')).toBe(0);
    } finally {
      process.off('uncaughtException', record).off('unhandledRejection', record);
    }
  });

  it('refuses a routine that is not a function before taking the lock', async () => {
    const error = await redlock.using('routine', 1_000, 'run' as never).catch((e: unknown) => e);
    expect(invalid('routine')(error)).toBe(true);
    expect(await clients[0]!.exists('redlock:routine')).toBe(0);
  });

  it('refuses acquire options that are not an object', async () => {
    const error = await redlock.acquire('options', 1_000, null as never).catch((e: unknown) => e);
    expect(invalid('options')(error)).toBe(true);
  });
});

describe('credentials', () => {
  it('never appear in node names or errors', async () => {
    const guarded = await RedisFleet.start(3);
    try {
      const admins = await connectMasters(guarded.urls());
      await Promise.all(admins.map((admin) => admin.config('SET', 'requirepass', 'the-right-one')));
      disconnectAll(admins);
      const wrong = guarded.urls().map((url) => url.replace('redis://', 'redis://default:hunter2-secret@'));
      const locked = wrong.map((url) => new Redis(url, { ...LOCK_CLIENT_OPTIONS, retryStrategy: () => null }));
      extra.push(...locked);
      for (const client of locked) client.on('error', () => {});
      const engine = new Redlock(locked, FRESH_FLEET);
      expect(engine.nodes.map((n) => n.name)).toEqual(guarded.nodes.map((n) => `127.0.0.1:${n.port}`));
      const error = await engine.acquire('secret', 1_000).catch((e) => e);
      expect(error).toBeInstanceOf(QuorumUnreachableError);
      expect(`${error.message} ${JSON.stringify(error.nodes)} ${error.stack}`).not.toContain('hunter2');
    } finally {
      await guarded.stopAll();
    }
  });
});
