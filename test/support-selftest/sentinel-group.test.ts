import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disconnectAll } from '../support/masters.js';
import { SentinelGroup, sentinelClient, untilServes } from '../support/sentinel-group.js';

// The Sentinel harness itself: replication that can be cut off, forced failovers, servers that
// come back as replicas, and nothing left running afterwards.

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let group: SentinelGroup;

beforeAll(async () => {
  group = await SentinelGroup.start({ name: 'selftest' });
});

afterAll(async () => {
  await group?.stopAll();
});

/** INFO replication of the master and of server `index`, and the master the Sentinel names: for a failure's message. */
async function replicationState(group: SentinelGroup, index: number): Promise<string> {
  const brief = (info: string) => info.split('\r\n').filter((line) => /^(role|master_host|master_port|master_link_status|connected_slaves|slave\d|master_repl_offset|slave_repl_offset)/.test(line)).join(', ');
  const sentinel = new Redis({ host: '127.0.0.1', port: group.sentinelPorts()[0]!, maxRetriesPerRequest: 1 });
  sentinel.on('error', () => {});
  try {
    const named = await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', group.name).catch((error: Error) => error.message);
    return [
      `master (server ${group.masterIndex}): ${brief(await group.direct(group.masterIndex).info('replication'))}`,
      `server ${index}: ${brief(await group.direct(index).info('replication'))}`,
      `Sentinel names the master at ${JSON.stringify(named)}`,
    ].join('; ');
  } finally {
    sentinel.disconnect();
  }
}

describe('SentinelGroup', () => {
  it('starts a master, a replica that follows it, and a Sentinel that knows both', async () => {
    expect(group.processCount).toBe(3);
    const [replica] = group.replicaIndexes();
    await group.direct(group.masterIndex).set('followed', '1');
    expect(await group.direct(group.masterIndex).wait(1, 5_000)).toBe(1);
    expect(await group.direct(replica!).get('followed')).toBe('1');
    const client = sentinelClient(group);
    try {
      await untilServes(client, group.server(group.masterIndex).port);
    } finally {
      client.disconnect();
    }
  });

  it('holdReplication() keeps new writes from the replica until releaseReplication()', async () => {
    const [replica] = group.replicaIndexes();
    await group.holdReplication();
    await group.direct(group.masterIndex).set('held', '1');
    expect(await group.direct(group.masterIndex).wait(1, 200)).toBe(0);
    expect(await group.direct(replica!).exists('held')).toBe(0);
    await group.releaseReplication();
    await expect.poll(() => group.direct(replica!).get('held')).toBe('1');
  });

  it('failover() promotes the replica after a crash; restartAsReplica() brings the old master back under it', async () => {
    const old = group.masterIndex;
    const [replica] = group.replicaIndexes();
    const client = sentinelClient(group);
    try {
      await group.kill(old);
      expect(await group.failover()).toBe(replica);
      expect(group.masterIndex).toBe(replica);
      await untilServes(client, group.server(replica!).port); // clients follow through the Sentinel
      await group.restartAsReplica(old);
      expect(group.replicaIndexes()).toEqual([old]);
      await group.direct(group.masterIndex).set('after', '1');
      // Polled: under double load a WAIT of 5 s right after the restart once counted no replica,
      // and once the write did not reach the replica in 20 s, its link up both times: a replica
      // that acknowledged nothing (offset -1). restartAsReplica now waits for the replica's first
      // acknowledgement and starts it again if none comes; should the write still not arrive, the
      // failure says what each server and the Sentinel saw.
      await expect
        .poll(() => group.direct(old).get('after'), { timeout: 20_000 })
        .toBe('1')
        .catch(async (error: Error) => {
          throw new Error(`${error.message}\n${await replicationState(group, old)}`, { cause: error });
        });
      expect(await group.direct(group.masterIndex).wait(1, 10_000)).toBe(1);
    } finally {
      disconnectAll([client]);
    }
  });

  it('stopAll() leaves no process behind and is idempotent', async () => {
    const other = await SentinelGroup.start({ name: 'stopped', replicas: 2 });
    const pids = other.pids;
    expect(pids).toHaveLength(4); // a master, two replicas, a Sentinel
    expect(pids.every(isAlive)).toBe(true);
    await Promise.all([other.stopAll(), other.stopAll()]);
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  });
});
