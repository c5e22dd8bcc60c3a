import type { LockHeldError } from '../core/base/errors.js';

/** Estimates made by decorated methods for the LockHeldErrors of their own acquires. */
const estimates = new WeakMap<LockHeldError, number>();

/**
 * Records when the lock of `error` is likely free, in ms from now (see HoldTimes), for every
 * mapping of the error to answer with: the 409's `Retry-After` and the transports' payloads.
 * Kept beside the error rather than written into it: the core error's `retryAfterMs` is a fact
 * (the holder's remaining ttl), this is a guess.
 */
export function setRetryAfterEstimate(error: LockHeldError, ms: number): void {
  estimates.set(error, ms);
}

/**
 * In how many ms a client should try again: the estimate a decorated method made for its lock,
 * else the holder's remaining ttl (a lock taken by hand), else undefined.
 */
export function retryAfterMsOf(error: LockHeldError): number | undefined {
  return estimates.get(error) ?? error.retryAfterMs;
}
