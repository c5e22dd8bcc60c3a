import { expect, it } from 'vitest';
import { clusterVoterSuite } from './cluster-harness.js';

/**
 * A shard failover before the engine first read the slot map (a deployment right after it): the
 * promoted master's uptime says nothing of when it took over, so what it may lack is unknown.
 * A cluster of its own: the failover leaves the shard without a replica.
 */
const suite = clusterVoterSuite();

it('a failover before the engine first read the slot map: the promoted owner waits the window from then', async () => {
  // Held on the cluster and standalone master 0; the shard's new master lacks the key.
  const { held: lock } = await suite.loseShard('{late}', 1_500, (holder) => holder.redlock.acquire('late', 30_000), (client) => client.exists('redlock:{late}'));
  // Every server older than the late engine's window: only the promotion can keep the new owner's vote from counting.
  const windowMs = 5_000;
  await expect.poll(async () => (await suite.ages()).every((age) => age > windowMs + 500), { timeout: 20_000, interval: 200 }).toBe(true);
  // A new engine: it never saw the slot's old owner. Standalone master 1 (restarted empty) grants,
  // master 0 refuses, and the cluster's new owner of the slot must not count.
  const late = await suite.engine({ restartQuarantineMs: windowMs });
  expect(await late.redlock.tryAcquire('late', 30_000)).toBeNull();
  expect(lock.remainingMs()).toBeGreaterThan(0);
  const health = await late.redlock.checkMasters();
  expect(health.masters[0]!.shardsQuarantinedForMs).toBeGreaterThan(0);
  await lock.release();
}, 90_000);
