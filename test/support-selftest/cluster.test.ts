import { Cluster } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisCluster } from '../support/redis-cluster.js';

// The Redis Cluster test support (for Cluster voters, issue 15) does what the tests will rely on:
// a cluster an ioredis Cluster client can use, and failovers that change which server answers.

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1 });
}, 60_000);
afterAll(async () => {
  await cluster?.stopAll();
});

const WHO = "local i = redis.call('INFO', 'server'); return {redis.call('GET', KEYS[1]), string.match(i, 'run_id:(%x+)')}";

it('serves a Cluster client, and a failover hands a key\'s slot to another server behind the same client', async () => {
  const client = new Cluster(cluster.startupNodes());
  client.on('error', () => {});
  try {
    expect(await cluster.masters()).toHaveLength(3);
    await client.set('probe', '1');
    const [, before] = (await client.eval(WHO, 1, 'probe')) as [string, string];
    const master = await cluster.masterOf('probe');
    const replica = await cluster.replicaOf(master);
    await cluster.failover(replica);
    expect(await cluster.masterOf('probe')).toBe(replica);
    // The client follows the move on its own: the same call now runs on another server.
    const [value, after] = (await client.eval(WHO, 1, 'probe')) as [string, string];
    expect(value).toBe('1'); // a manual failover waits for the replica to catch up
    expect(after).not.toBe(before);
  } finally {
    client.disconnect();
  }
}, 60_000);
