import { monotonicNow } from './core/base/clock.js';
import type { LockHeldError } from './core/base/errors.js';
import { setRetryAfterEstimate } from './errors/retry-after.js';

/** Weight of the latest hold in the moving estimate: roughly the last four holds count. */
export const HOLD_WEIGHT = 0.25;
/** Retry-After is in whole seconds, and 0 would invite a client to hammer the lock. */
const MIN_RETRY_AFTER_MS = 1_000;

/**
 * How long one decorated method has held its lock recently, for the `Retry-After` of a 409
 * (and the `retryAfterMs` of the RPC, websocket and GraphQL payloads) when its lock is held
 * elsewhere. The holder's remaining ttl alone overstates the wait: a 10 s ttl for work of
 * 0.5 s would send clients away twenty times longer than needed.
 *
 * The estimate is an exponentially weighted moving average of the method's hold durations in
 * this process (from the lock taken to its work ended), `estimate += 0.25 × (hold − estimate)`,
 * the first hold taken as it is: one number per decorated method, whatever its keys. The
 * holder elsewhere is most likely another call of the same method (another replica's), so the
 * lock should be free at most one typical hold from now. The answer is
 * `max(1 s, min(estimate, holder's remaining ttl))`: never later than the lock expires unless
 * extended, never sooner than a second; without any hold yet, the holder's remaining ttl.
 */
export class HoldTimes {
  #estimateMs: number | undefined;

  /** The moving estimate of a hold, in ms; undefined before the first hold ended. */
  get estimateMs(): number | undefined {
    return this.#estimateMs;
  }

  /** Starts timing a hold; the returned function ends it (once, however often it is called). */
  start(): () => void {
    const startedAt = monotonicNow();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.record(monotonicNow() - startedAt);
    };
  }

  record(heldMs: number): void {
    const previous = this.#estimateMs;
    this.#estimateMs = previous === undefined ? heldMs : previous + HOLD_WEIGHT * (heldMs - previous);
  }

  /** In how many ms the lock is likely free, given the holder's remaining ttl when the masters reported it. */
  retryAfterMs(holderRemainingMs: number | undefined): number | undefined {
    const estimate = this.#estimateMs === undefined ? holderRemainingMs : Math.min(this.#estimateMs, holderRemainingMs ?? Infinity);
    return estimate === undefined ? undefined : Math.max(MIN_RETRY_AFTER_MS, Math.ceil(estimate));
  }

  /** Attaches the estimate to a LockHeldError of this method's own acquire, for whatever answers the client. */
  annotate(error: LockHeldError): void {
    const ms = this.retryAfterMs(error.retryAfterMs);
    if (ms !== undefined) setRetryAfterEstimate(error, ms);
  }
}
