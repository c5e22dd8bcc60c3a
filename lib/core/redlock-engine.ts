import type { Redlock } from './redlock.js';

/**
 * What the Nest layer asks of a lock engine: take, hold and release locks, and the bootstrap,
 * health and shutdown calls. `Redlock` is the engine of production; `InMemoryRedlock`
 * (`nestjs-redlock/testing`) is the other, a single-process model for unit tests. Code written
 * against this type runs on either.
 */
export type RedlockEngine = Pick<
  Redlock,
  'acquire' | 'tryAcquire' | 'adopt' | 'claim' | 'election' | 'inspect' | 'using' | 'enter' | 'expectTtl' | 'verifyMasters' | 'checkMasters' | 'heldLocks' | 'releaseAll' | 'close'
>;
