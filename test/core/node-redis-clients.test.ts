import { createClient, createClientPool, createCluster, createSentinel } from 'redis';
import { createClient as createClientV4 } from 'redis4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, QuorumUnreachableError, Redlock } from '../../lib/index.js';
import type { Redis } from 'ioredis';
import { connectMasters, disconnectAll, FRESH_FLEET, lockClient, untilReady } from '../support/masters.js';
import { nodeRedisLockClient } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { freePort } from '../support/free-port.js';
import { RedisFleet } from '../support/redis-fleet.js';

// What the engine takes of node-redis: standalone clients, connected, speaking RESP2. What it
// cannot vote with is refused when the engine is made, saying why and naming the place in the
// list, never the credentials.

const SECRET = 'node-redis-secret-5e1b';
let fleet: RedisFleet;
const opened: ReturnType<typeof createClient>[] = [];
const ioredisOpened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  // After the start: the fleet's readiness probe does not authenticate.
  const admins = await connectMasters(fleet.urls());
  await Promise.all(admins.map((admin) => admin.config('SET', 'requirepass', SECRET)));
  disconnectAll(admins);
});

afterAll(async () => {
  disconnectAll([...(opened as never[]), ...ioredisOpened]);
  await fleet?.stopAll();
});

/** node-redis clients of the fleet's masters, with the password in the URL. */
async function connected(): Promise<ReturnType<typeof createClient>[]> {
  const clients = fleet.nodes.map((node) => nodeRedisLockClient(`redis://:${SECRET}@127.0.0.1:${node.port}`));
  opened.push(...clients);
  await Promise.all(clients.map((client) => client.connect()));
  return clients;
}

describe('node-redis clients as masters', () => {
  it('are taken as they come from createClient(), and locks hold across engines', async () => {
    const [a, b] = [new Redlock(await connected(), FRESH_FLEET), new Redlock(await connected(), FRESH_FLEET)];
    const held = await a.acquire('nr:one', 5_000);
    expect(await b.tryAcquire('nr:one', 5_000)).toBeNull();
    const waiting = b.acquire('nr:one', 5_000, { waitTimeoutMs: 10_000 });
    await held.release();
    await (await waiting).release();
    a.close();
    b.close();
  });

  it('vote beside ioredis clients in one engine: a lock, a wait and its wake-up across both libraries', async () => {
    const mixed = async () => {
      const [first, ...rest] = await connected();
      const ioredis = lockClient(`redis://:${SECRET}@127.0.0.1:${fleet.nodes[0]!.port}`);
      ioredisOpened.push(ioredis);
      await untilReady(ioredis);
      first!.destroy();
      return new Redlock([ioredis, ...rest], FRESH_FLEET);
    };
    const [a, b] = [await mixed(), await mixed()];
    const held = await a.acquire('nr:mixed', 5_000, { fencing: true });
    const waiting = b.acquire('nr:mixed', 5_000, { fencing: true, waitTimeoutMs: 10_000 });
    await held.release();
    const next = await waiting;
    expect(next.fence).toBeGreaterThan(held.fence!);
    await next.release();
    a.close();
    b.close();
  });

  it('authenticated by a credentialsProvider alone: locks hold, and the wake-up connection, given no password, is reported once per master', async () => {
    const clients = fleet.nodes.map((node) =>
      createClient({
        socket: { host: '127.0.0.1', port: node.port, reconnectStrategy: false },
        credentialsProvider: { type: 'async-credentials-provider', credentials: async () => ({ password: SECRET }) },
        disableOfflineQueue: true,
      }),
    );
    opened.push(...clients);
    for (const client of clients) client.on('error', () => {});
    await Promise.all(clients.map((client) => client.connect()));
    const warnings: string[] = [];
    const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: (message) => warnings.push(message) } });
    const other = new Redlock(await connected(), FRESH_FLEET);
    const held = await other.acquire('nr:provider', 5_000);
    const waiting = redlock.acquire('nr:provider', 5_000, { waitTimeoutMs: 20_000 });
    // The waiter's first pause opens its wake-up connections, which the masters refuse.
    await expect.poll(() => warnings.filter((warning) => warning.includes('wake-up connection')).length, { timeout: 10_000 }).toBe(3);
    await held.release();
    await (await waiting).release();
    const wakeWarnings = (port: number) => warnings.filter((warning) => warning.includes(`master 127.0.0.1:${port} `) && warning.includes('wake-up connection'));
    expect(fleet.nodes.map((node) => wakeWarnings(node.port).length)).toEqual([1, 1, 1]);
    expect(warnings.join('\n')).not.toContain(SECRET);
    redlock.close();
    other.close();
  });

  it('are named by host and port in errors, never with the password of their URL', async () => {
    const port = await freePort();
    const down = createClient({ url: `redis://user:${SECRET}@127.0.0.1:${port}`, disableOfflineQueue: true, socket: { reconnectStrategy: false } });
    down.on('error', () => {});
    opened.push(down);
    await down.connect().catch(() => {});
    // A client whose connection failed is closed: it cannot be a master.
    expect(() => new Redlock([down])).toThrow(InvalidArgumentError);

    const clients = await connected();
    const redlock = new Redlock(clients, FRESH_FLEET);
    await fleet.kill(1);
    await fleet.kill(2);
    const error = await redlock.acquire('nr:named', 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    expect((error as Error).message).toContain(`127.0.0.1:${fleet.nodes[1]!.port}`);
    expect((error as Error).message).not.toContain(SECRET);
    expect(redlock.nodes.map((node) => node.name)).toEqual(fleet.nodes.map((node) => `127.0.0.1:${node.port}`));
    redlock.close();
    await Promise.all([fleet.start(1), fleet.start(2)]);
  });

  it.each([
    ['a Cluster client', () => createCluster({ rootNodes: [{ url: `redis://:${SECRET}@127.0.0.1:7000` }] }), /node-redis Cluster client \(createCluster\) is not supported/],
    ['a Sentinel client', () => createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: '127.0.0.1', port: 26379 }] }), /node-redis Sentinel client \(createSentinel\) is not supported/],
    ['a client pool', () => createClientPool({ url: `redis://:${SECRET}@127.0.0.1:6390` }), /client pool \(createClientPool\) is not supported/],
    ['a RESP3 client', () => createClient({ RESP: 3 }), /RESP3 is not supported/],
    ['a node-redis 4 client in legacyMode', () => createClientV4({ legacyMode: true }), /legacyMode is not supported/],
    ['a client not connected', () => createClient({ url: `redis://:${SECRET}@127.0.0.1:6390` }), /must have been opened/],
  ])('refuses %s, saying why, never with its credentials', (_name, make, why) => {
    const client = make() as unknown as RedlockClient;
    let error: unknown;
    try {
      new Redlock([client]);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('clients[0]');
    expect((error as Error).message).toMatch(why);
    expect((error as Error).message).not.toContain(SECRET);
  });
});
