import { describe } from 'vitest';
import { InMemoryRedlock, RedlockTestingModule } from '../../lib/testing/index.js';
import { lockContract, type LockTarget } from './lock-contract.js';
import { sharedLockContract } from './shared-lock-contract.js';

// The lock contract against RedlockTestingModule: no Redis; the faults are the engine's controls.

const inMemory: LockTarget = {
  lockModule: (options = {}) => RedlockTestingModule.forRoot(options),
  faults(app) {
    const engine = app.get(InMemoryRedlock);
    return {
      holdElsewhere: async (resource, ttlMs) => engine.holdElsewhere(resource, { ttlMs }),
      releaseElsewhere: async (resource) => void engine.releaseElsewhere(resource),
      makeQuorumUnreachable: async () => engine.makeQuorumUnreachable(),
      restoreQuorum: async () => engine.restoreQuorum(),
      loseLock: async (resource) => engine.loseLock(resource),
      waiters: async (resource) => engine.waitingFor(resource),
      // Nothing outlives the app: its engine goes with it.
      clear: async () => {},
    };
  },
};

describe('RedlockTestingModule (in memory)', () => {
  lockContract(() => inMemory);
  sharedLockContract(() => inMemory);
});
