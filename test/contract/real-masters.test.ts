import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe } from 'vitest';
import { type Lock, Redlock, RedlockModule } from '../../lib/index.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { connectMasters, disconnectAll, FRESH_FLEET, untilReady } from '../support/masters.js';
import { connectLockClients, MODULE_CLIENT_LIBRARIES, untilLockClientReady, type ClientLibrary } from '../support/lock-clients.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { fleetOptions } from '../nest/nest-helpers.js';
import { lockContract, type LockTarget } from './lock-contract.js';
import { sharedLockContract } from './shared-lock-contract.js';

// The lock contract against RedlockModule on 3 real masters, once per client library: the
// module connects its masters with it (options.client) and the other owner's engine uses it.
// Another owner is a second engine with connections of its own; an unreachable quorum is 2 of
// the 3 masters killed; a lost lock is its key deleted on every master, which the lock's next
// extension finds.

let fleet: RedisFleet;
let direct: Redis[];
const DOWN = [0, 1];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  direct = await connectMasters(fleet.urls());
});

afterAll(async () => {
  disconnectAll(direct ?? []);
  await fleet?.stopAll();
});

describe.each(MODULE_CLIENT_LIBRARIES)('RedlockModule (3 real masters, %s)', (library: (typeof MODULE_CLIENT_LIBRARIES)[number]) => {
  let otherClients: RedlockClient[] = [];
  let other: Redlock;
  const heldElsewhere = new Map<string, Lock>();

  beforeAll(async () => {
    otherClients = await connectLockClients(library, fleet.urls());
    other = new Redlock(otherClients, FRESH_FLEET);
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await other.verifyMasters();
  });

  afterAll(() => {
    other?.close();
    disconnectAll(otherClients);
  });

  async function restoreQuorum(): Promise<void> {
    await Promise.all(DOWN.map((index) => (fleet.nodes[index]!.running ? undefined : fleet.start(index))));
    // The test's own clients reconnect by themselves; the app's are awaited by the contract.
    await Promise.all([...otherClients.map(untilLockClientReady), ...direct.map(untilReady)]);
  }

  const realMasters: LockTarget = {
    lockModule: (options = {}) => RedlockModule.forRoot({ ...fleetOptions(fleet), client: library, ...options }),
    faults: () => ({
      async holdElsewhere(resource, ttlMs) {
        heldElsewhere.set(resource, await other.acquire(resource, ttlMs));
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

  lockContract(() => realMasters);
  sharedLockContract(() => realMasters);
});
