import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redlock, type Lock } from '../../lib/core/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { RedisFleet } from '../support/redis-fleet.js';

// A slot that goes M -> R -> M (a graceful CLUSTER FAILOVER, then R dies and M, which kept
// running as R's replica, takes its slots back) comes back to the server this engine recorded as
// the slot's owner, with the same run_id, but lacking a key R granted to another process and
// never replicated. Its promotion started a new replication id: the shard quarantine must hold
// its vote back for that slot.

const WINDOW = 10_000;
const TTL = 8_000;
let cluster: RedisCluster;
let fleet: RedisFleet;
const opened: { disconnect(): void }[] = [];
const admin: Redis[] = [];

beforeAll(async () => {
  [cluster, fleet] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 1 }), RedisFleet.start(2)]);
  for (const node of cluster.fleet.nodes) {
    const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await client.call('READONLY');
    await client.config('SET', 'repl-diskless-sync-delay', '0');
    admin.push(client);
    opened.push(client);
  }
}, 90_000);

afterAll(async () => {
  for (const client of opened) client.disconnect();
  await Promise.all([cluster?.stopAll(), fleet?.stopAll()]);
});

function clusterClient(): Cluster {
  const client = new Cluster(cluster.startupNodes(), { enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
const field = (info: string, name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
const info = (index: number, section: string) => admin[index]!.info(section);

it('a slot that fails over and back to the same server process: its vote waits out the window', async () => {
  const key = 'redlock:{aba}';
  // Every server older than the window: only a change of owner can quarantine anything.
  await until(async () => {
    const all = await Promise.all([...admin, ...(await connectMasters(fleet.urls()).then((c) => (opened.push(...c), c)))].map((c) => c.info('server')));
    return all.every((i) => Number(field(i, 'uptime_in_seconds')) * 1000 > WINDOW);
  }, 'every server to be older than the window');

  const M = await cluster.masterOf('{aba}');
  const R = await cluster.replicaOf(M);
  const mRunId = field(await info(M, 'server'), 'run_id');

  // E reads the slot map now: M owns the slot.
  const eClients = [clusterClient() as unknown as Redis, ...(await connectMasters(fleet.urls()))];
  opened.push(...eClients);
  const e = new Redlock(eClients, { restartQuarantineMs: WINDOW, nodeTimeoutMs: 1_000, logger: { warn: () => {} } });
  await e.verifyMasters();
  await expect.poll(async () => (await e.checkMasters()).masters[0]!.votes, { timeout: 10_000 }).toBe(true);

  // Planned maintenance: R takes over gracefully; M keeps running as R's replica.
  await admin[R]!.call('CLUSTER', 'FAILOVER');
  await cluster.untilPromoted(R);
  await until(async () => field(await info(M, 'replication'), 'master_link_status') === 'up', 'M to replicate R');

  // P (another process) locks the resource on R and standalone 0, while R's writes no longer reach M.
  const pCluster = clusterClient();
  await until(async () => pCluster.status === 'ready', 'P ready');
  await pCluster.exists(key); // P's connection to R, before R asks for a password
  const [s0] = await connectMasters([fleet.urls()[0]!]);
  opened.push(s0!);
  const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  dead.on('error', () => {});
  opened.push(dead);
  // P's own quarantine is off: it would wait a whole window on R, promoted before P first met it.
  const p = new Redlock([pCluster as unknown as Redis, s0!, dead], { restartQuarantineMs: false, nodeTimeoutMs: 1_000, logger: { warn: () => {} } });
  await p.verifyMasters().catch(() => {});
  await admin[R]!.config('SET', 'requirepass', 'held');
  await admin[R]!.call('CLIENT', 'KILL', 'TYPE', 'replica');
  await until(async () => field(await info(M, 'replication'), 'master_link_status') === 'down', 'M cut off from R');
  const held: Lock = await p.acquire('aba', TTL, { waitTimeoutMs: 10_000 });

  // R dies; M takes the slot back. Same process as before: same run_id, long uptime; no key.
  await cluster.fleet.kill(R);
  await admin[M]!.call('CLUSTER', 'FAILOVER', 'TAKEOVER');
  await cluster.untilPromoted(M);
  expect(field(await info(M, 'server'), 'run_id')).toBe(mRunId);
  expect(await admin[M]!.exists(key)).toBe(0);

  // E asks: M (no key, judged as the slot's owner all along) and standalone 1 (no key) grant.
  const second = await e.tryAcquire('aba', TTL);
  expect(held.remainingMs()).toBeGreaterThan(0);
  expect(second).toBeNull();
}, 120_000);
