import { performance } from 'node:perf_hooks';

/** Monotonic milliseconds: wall-clock jumps (NTP, manual changes) must not stretch a lock. */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * How long a lock may be relied on, per the Redlock validity rule: the ttl, less the time the
 * round took, less the clock drift between client and masters (plus 2 ms for Redis's 1 ms
 * expiry precision and a floor for short ttls).
 */
export function validityMs(ttlMs: number, elapsedMs: number, driftFactor: number): number {
  return ttlMs - elapsedMs - (Math.round(ttlMs * driftFactor) + 2);
}
