import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe } from 'vitest';
import { type Lock, RedlockModule } from '../../lib/index.js';
import { connectMasters, disconnectAll, separateEngine, untilReady } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { fleetOptions } from '../nest/nest-helpers.js';
import { lockContract, type LockTarget } from './lock-contract.js';
import { sharedLockContract } from './shared-lock-contract.js';

// The lock contract against RedlockModule on 3 real masters. Another owner is a second engine
// with connections of its own; an unreachable quorum is 2 of the 3 masters killed; a lost lock
// is its key deleted on every master, which the lock's next extension finds.

let fleet: RedisFleet;
const opened: Redis[] = [];
let other: Awaited<ReturnType<typeof separateEngine>>;
let direct: Redis[];
const heldElsewhere = new Map<string, Lock>();
const DOWN = [0, 1];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  other = await separateEngine(fleet.urls(), opened);
  direct = await connectMasters(fleet.urls());
  opened.push(...direct);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

async function restoreQuorum(): Promise<void> {
  await Promise.all(DOWN.map((index) => (fleet.nodes[index]!.running ? undefined : fleet.start(index))));
  // The test's own clients reconnect by themselves; the app's are awaited by the contract.
  await Promise.all([...other.clients, ...direct].map(untilReady));
}

const realMasters: LockTarget = {
  lockModule: (options = {}) => RedlockModule.forRoot({ ...fleetOptions(fleet), ...options }),
  faults: () => ({
    async holdElsewhere(resource, ttlMs) {
      heldElsewhere.set(resource, await other.redlock.acquire(resource, ttlMs));
    },
    async releaseElsewhere(resource) {
      await heldElsewhere.get(resource)?.release();
      heldElsewhere.delete(resource);
    },
    async makeQuorumUnreachable() {
      await Promise.all(DOWN.map((index) => fleet.kill(index)));
    },
    restoreQuorum,
    async loseLock(resource) {
      await Promise.all(direct.map((client) => client.del(`redlock:${resource}`)));
    },
    async waiters(resource) {
      const counts = await Promise.all(direct.map((client) => client.hlen(`redlock-queue:${resource}`).catch(() => 0)));
      return Math.max(...counts);
    },
    async clear() {
      await restoreQuorum();
      await Promise.all([...heldElsewhere.values()].map((lock) => lock.release()));
      heldElsewhere.clear();
    },
  }),
};

describe('RedlockModule (3 real masters)', () => {
  lockContract(() => realMasters);
  sharedLockContract(() => realMasters);
});
