/**
 * Monotonic milliseconds: wall-clock jumps (NTP, manual changes) must not stretch a lock.
 * Read from the global `performance` at each call (the same object as node:perf_hooks'), so
 * that fake timers, which replace it, move locks' clocks along with their timers in tests.
 */
export function monotonicNow(): number {
  return globalThis.performance.now();
}

/**
 * How long a lock may be relied on, per the Redlock validity rule: the ttl, less the time the
 * round took, less the clock drift between client and masters (plus 2 ms for Redis's 1 ms
 * expiry precision and a floor for short ttls).
 */
export function validityMs(ttlMs: number, elapsedMs: number, driftFactor: number): number {
  return ttlMs - elapsedMs - (Math.round(ttlMs * driftFactor) + 2);
}

/**
 * What is left at `now` of the validity of a round that began at `start`. Validity counts from
 * `start`, so the round's own time is spent out of it: a lock is only a lock while this is > 0.
 */
export function validityLeftMs(ttlMs: number, start: number, now: number, driftFactor: number): number {
  return start + validityMs(ttlMs, now - start, driftFactor) - now;
}
