import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redlock } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// Every connection says who its server is (INFO server) before its first vote, so a take can wait
// for that while the round is decided by the other masters. A release sent meanwhile must not
// overtake it: it would find nothing to free, and the late take would leave a key behind.

let fleet: RedisFleet;
let proxy: TcpProxy;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  proxy = await TcpProxy.start({ host: '127.0.0.1', port: fleet.nodes[2]!.port });
});

afterAll(async () => {
  disconnectAll(opened);
  await proxy?.close();
  await fleet?.stopAll();
});

it('a release goes out behind a take that waits for its master to be identified', async () => {
  proxy.setLatency(0);
  const clients = await connectMasters([fleet.nodes[0]!.url, fleet.nodes[1]!.url, proxy.url]);
  opened.push(...clients);
  // The release script is in every master's cache already (else its NOSCRIPT answer would
  // delay it past the take by chance).
  const warm = await connectMasters(fleet.urls());
  opened.push(...warm);
  await (await new Redlock(warm, FRESH_FLEET).acquire('warm-up', 1_000)).release();
  // A slow third master: its identification takes a round trip the other two do not wait for.
  proxy.setLatency(60);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, nodeTimeoutMs: 2_000 });
  const lock = await redlock.acquire('identified', 10_000);
  const result = await lock.release();
  await expect.poll(() => result.nodes[2]!.status, { timeout: 5_000 }).not.toBe('pending');
  expect(result.nodes[2]!.status).toBe('granted');
  expect(await clients[0]!.get('redlock:identified')).toBeNull();
  const direct = await connectMasters([fleet.nodes[2]!.url]);
  opened.push(...direct);
  expect(await direct[0]!.get('redlock:identified')).toBeNull();
});
