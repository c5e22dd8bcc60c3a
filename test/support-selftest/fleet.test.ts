import { Redis, type RedisOptions } from 'ioredis';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../support/free-port.js';
import { findRedisServer } from '../support/redis-binary.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// These tests drive real redis-server processes: they prove the harness that every
// fault-injection test relies on actually injects the fault it claims to.

const clients: Redis[] = [];
/** Every client is tracked so afterEach can disconnect it, pass or fail. */
function client(url: string, extra: RedisOptions = {}): Redis {
  const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1, ...extra });
  redis.on('error', () => {}); // expected in fault tests; assertions use the command results
  clients.push(redis);
  return redis;
}

/** Resolves 'timeout' unless `promise` settles first: "not answered within ms". */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  promise.catch(() => {}); // the loser of the race must not become an unhandled rejection
  return Promise.race([promise, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms))]);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

afterEach(() => {
  for (const redis of clients.splice(0)) redis.disconnect();
});

describe('helpers', () => {
  it('finds redis-server and hands out free ports other than 6379', async () => {
    expect(findRedisServer()).toMatch(/redis-server$/);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(ports).not.toContain(6379);
  });
});

describe('RedisFleet', () => {
  let fleet: RedisFleet;

  beforeAll(async () => {
    fleet = await RedisFleet.start(3);
  });
  afterAll(async () => {
    await fleet?.stopAll();
  });

  it('starts independent nodes that answer PING', async () => {
    expect(fleet.nodes).toHaveLength(3);
    expect(new Set(fleet.nodes.map((n) => n.port)).size).toBe(3);
    expect(fleet.urls()).toEqual(fleet.nodes.map((n) => `redis://127.0.0.1:${n.port}`));
    for (const node of fleet.nodes) {
      expect(node.port).not.toBe(6379);
      expect(node).toMatchObject({ running: true, paused: false, host: '127.0.0.1' });
      expect(await client(node.url).ping()).toBe('PONG');
    }
    // Independent masters: a write on one is invisible on the others.
    await client(fleet.nodes[0]!.url).set('only-on-0', '1');
    expect(await client(fleet.nodes[1]!.url).get('only-on-0')).toBeNull();
  });

  it('kill() makes the port refuse connections; start() brings it back empty on the same port', async () => {
    const node = fleet.nodes[1]!;
    const port = node.port;
    await client(node.url).set('before-kill', 'x');

    await fleet.kill(1);
    expect(node).toMatchObject({ running: false, pid: undefined });
    const refused = client(node.url, { retryStrategy: () => null });
    const [error] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
    expect(error.code).toBe('ECONNREFUSED');

    await fleet.start(1);
    expect(node.port).toBe(port);
    expect(node.running).toBe(true);
    expect(await client(node.url).get('before-kill')).toBeNull();
  });

  it('pause() leaves commands unanswered until resume()', async () => {
    const redis = client(fleet.nodes[0]!.url, { commandTimeout: 300 });
    expect(await redis.ping()).toBe('PONG'); // connected before the pause

    fleet.pause(0);
    expect(fleet.nodes[0]!.paused).toBe(true);
    await expect(redis.ping()).rejects.toThrow(/timed out/i);

    fleet.resume(0);
    expect(fleet.nodes[0]!.paused).toBe(false);
    expect(await redis.ping()).toBe('PONG');
  });

  describe('TcpProxy in front of node 2', () => {
    let proxy: TcpProxy;
    beforeAll(async () => {
      proxy = await TcpProxy.start({ host: '127.0.0.1', port: fleet.nodes[2]!.port });
    });
    afterEach(() => {
      proxy.setLatency(0);
      proxy.blackhole(false);
      proxy.dropNextReplies(0);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('forwards traffic', async () => {
      expect(proxy.url).toBe(`redis://127.0.0.1:${proxy.port}`);
      expect(await client(proxy.url).ping()).toBe('PONG');
    });

    it('setLatency() delays traffic', async () => {
      const redis = client(proxy.url);
      expect(await redis.ping()).toBe('PONG');
      proxy.setLatency(100);
      const started = performance.now();
      expect(await redis.ping()).toBe('PONG');
      // 100 ms each way; the bound is deliberately loose, the point is that a delay happened.
      expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    });

    it('keeps byte order when the latency drops while chunks are queued', async () => {
      const redis = client(proxy.url);
      expect(await redis.ping()).toBe('PONG');
      proxy.setLatency(150);
      const slow = Array.from({ length: 10 }, () => redis.incr('latency-counter'));
      // Give the slow batch time to reach the proxy's queue (there is no event for that);
      // if it arrived later it would merely not be delayed, so this cannot cause a false failure.
      await new Promise((r) => setTimeout(r, 30));
      proxy.setLatency(0); // independent timers would now let the fast batch overtake the slow one
      const fast = Array.from({ length: 10 }, () => redis.incr('latency-counter'));

      const completion: number[] = [];
      const all = [...slow, ...fast].map((p) => p.then((value) => (completion.push(value), value)));
      // ioredis matches replies to commands FIFO, so reordered bytes would show up as wrong values.
      const expected = Array.from({ length: 20 }, (_, i) => i + 1);
      expect(await Promise.all(all)).toEqual(expected);
      expect(completion).toEqual(expected);
    });

    it('blackhole() keeps the connection but answers nothing', async () => {
      const redis = client(proxy.url);
      expect(await redis.ping()).toBe('PONG');
      proxy.blackhole(true);
      expect(await within(redis.get('anything'), 300)).toBe('timeout');
      expect(redis.status).toBe('ready'); // not closed, just silent
    });

    it('dropNextReplies(1) lets the server apply a SET whose reply never arrives', async () => {
      const redis = client(proxy.url);
      const direct = client(fleet.nodes[2]!.url);
      expect(await redis.ping()).toBe('PONG');
      await direct.del('dropped-reply');

      proxy.dropNextReplies(1);
      const set = redis.set('dropped-reply', 'applied');
      expect(await within(set, 300)).toBe('timeout');
      // The reply was dropped, so the server had applied it; waitFor only absorbs scheduling jitter.
      await vi.waitFor(async () => expect(await direct.get('dropped-reply')).toBe('applied'));
      expect(await within(set, 50)).toBe('timeout'); // still no reply
      // Only one reply was dropped: a fresh connection through the proxy works normally.
      expect(await client(proxy.url).get('dropped-reply')).toBe('applied');
    });

    it('resetConnections() breaks current connections only', async () => {
      const redis = client(proxy.url, { retryStrategy: () => null });
      expect(await redis.ping()).toBe('PONG');
      const errors: string[] = [];
      redis.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
      const closed = new Promise((resolve) => redis.once('close', resolve)); // events.once would reject on 'error'
      proxy.resetConnections();
      await closed;
      expect(errors).toContain('ECONNRESET');
      expect(await client(proxy.url).ping()).toBe('PONG');
    });
  });

  it('keeps data across restart only when asked, with appendonly', async () => {
    const durable = await RedisFleet.start(1, { appendonly: true });
    try {
      const url = durable.nodes[0]!.url;
      expect(await client(url).set('durable', 'yes')).toBe('OK');
      await durable.restart(0, { keepData: true });
      expect(await client(url).get('durable')).toBe('yes');
      await durable.stop(0); // graceful SIGTERM path
      expect(durable.nodes[0]!.running).toBe(false);
      await durable.start(0); // default keepData=false: wiped
      expect(await client(url).get('durable')).toBeNull();
    } finally {
      await durable.stopAll();
    }
  });

  it('stopAll() leaves no process behind and is idempotent', async () => {
    fleet.pause(1); // a stopped process must be cleaned up too
    const pids = fleet.nodes.map((n) => n.pid);
    expect(pids.every((pid) => pid !== undefined && isAlive(pid))).toBe(true);
    await fleet.stopAll();
    await fleet.stopAll();
    for (const pid of pids) expect(isAlive(pid!)).toBe(false);
    expect(fleet.nodes.every((n) => !n.running)).toBe(true);
    await expect(fleet.start(0)).rejects.toThrow(/stopAll/);
  });
});
