import { inspect } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redlock } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// A lock that ends up in a response body or a log line shows its resources, expiry and fence:
// never the engine behind it (whose clients carry every master's password), nor its token.

const PASSWORD = 'lock-serialisation-pw';
let fleet: RedisFleet;
let clients: Redis[];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  const admins = await connectMasters(fleet.urls());
  await Promise.all(admins.map((admin) => admin.config('SET', 'requirepass', PASSWORD)));
  disconnectAll(admins);
  clients = await connectMasters(fleet.nodes.map((node) => `redis://:${PASSWORD}@127.0.0.1:${node.port}`));
});

afterAll(async () => {
  disconnectAll(clients ?? []);
  await fleet?.stopAll();
});

it('JSON.stringify and util.inspect show resources, expiry and fence only', async () => {
  const redlock = new Redlock(clients, FRESH_FLEET);
  const lock = await redlock.acquire(['order:1', 'order:2'], 10_000, { fencing: true });
  try {
    const json = JSON.stringify(lock);
    const inspected = inspect(lock, { depth: 20, showHidden: true });
    for (const text of [json, inspected, inspect({ lock }, { depth: 20 })]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain(lock.token);
    }
    const shown = JSON.parse(json) as Record<string, unknown>;
    expect(Object.keys(shown).sort()).toEqual(['fence', 'remainingMs', 'resources', 'validUntil']);
    expect(shown['resources']).toEqual(['order:1', 'order:2']);
    expect(shown['fence']).toBe(lock.fence);
    expect(Date.parse(shown['validUntil'] as string)).toBeGreaterThan(Date.now());
    expect(inspected).toMatch(/^Lock \{/);
    // Nothing reachable by enumeration leads to the engine.
    expect(Object.keys(lock)).not.toContain('engine');
    expect(Object.values(lock).some((value) => value === redlock)).toBe(false);
    // The token is still there for code that asks for it.
    await expect.poll(() => clients[0]!.get('redlock:order:1')).toBe(lock.token);
  } finally {
    await lock.release();
  }
  expect(JSON.parse(JSON.stringify(lock))).toMatchObject({ validUntil: null, remainingMs: 0 });
});
