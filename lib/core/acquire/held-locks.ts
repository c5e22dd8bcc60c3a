import { monotonicNow } from '../base/clock.js';
import { LockLostError } from '../base/errors.js';
import type { InstrumentationGuard } from '../lock/instrumentation-guard.js';
import type { Lock } from '../lock/lock.js';
import type { RoundResult } from '../rounds/quorum-round.js';
import type { Waiter } from '../waiting/waiter.js';

/** How a held lock was had: what its release needs to know. */
export interface Acquisition {
  /**
   * The winning round if it ran a script: a release must not overtake its requests still in
   * flight (see ExclusiveKind.release). Undefined for plain SETs, which nothing re-sends out of order.
   */
  readonly round: RoundResult | undefined;
  /** The waiter id the lock queued under (its release clears that entry everywhere). */
  readonly waiter: Waiter;
  /** The winning round (or hand-off grant) could queue the waiter where it was refused (not a plain SET NX, nor a hand-over). */
  readonly queuing: boolean;
}

/**
 * What the engine keeps about a lock it holds. Kept on the lock itself (`lock.holding`), not in a
 * side table: every release reads it, and a WeakMap entry per lock cost more than the rest of
 * this bookkeeping together on the uncontended path.
 */
class Holding implements Acquisition {
  /** Its end (release or loss) was reported to the instrumentation. */
  ended = false;

  constructor(
    readonly round: RoundResult | undefined,
    readonly waiter: Waiter,
    readonly queuing: boolean,
    /** When it was acquired or handed over (monotonic ms), for the held time. */
    readonly heldSince: number,
  ) {}
}

function holdingOf(lock: Lock): Holding | undefined {
  const holding = lock.holding;
  return holding instanceof Holding ? holding : undefined;
}

/** When an instrumented engine registered the lock as held (monotonic ms): the end of its acquire call. */
export function heldSince(lock: Lock): number | undefined {
  return holdingOf(lock)?.heldSince;
}

/**
 * The locks an engine holds, how each was had, and the instrumentation's view of them: each lock
 * reported held is reported ended exactly once, released or lost. Locks that expire without a
 * release are forgotten at amortised O(1) per acquire.
 */
export class HeldLocks {
  readonly #held = new Set<Lock>();
  readonly #instrumentation: InstrumentationGuard | undefined;
  #pruneAt = 64;
  /** releaseAll is firing signals: those locks are released, not lost. */
  #releasingAll = false;

  constructor(instrumentation: InstrumentationGuard | undefined) {
    this.#instrumentation = instrumentation;
  }

  /**
   * A lock is held from now on: acquired, or handed over by a caller of this process. `since`:
   * the instant it became held (monotonic ms), when the caller has just read the clock anyway.
   */
  add(lock: Lock, round: RoundResult | undefined, waiter: Waiter, queuing: boolean, since?: number): void {
    this.#held.add(lock);
    if (this.#held.size >= this.#pruneAt) this.#prune();
    lock.holding = new Holding(round, waiter, queuing, since ?? (this.#instrumentation ? monotonicNow() : 0));
    this.#instrumentation?.lockHeld(lock);
  }

  /** The lock is being released: forgets it, reports its end, and says how it was had. */
  release(lock: Lock): Acquisition | undefined {
    this.#held.delete(lock);
    const holding = holdingOf(lock);
    if (this.#instrumentation && holding && !holding.ended) {
      holding.ended = true;
      const now = monotonicNow();
      const heldMs = now - holding.heldSince;
      // Nobody armed its signal, so nobody was told: it ran out of validity before this release.
      if (lock.expiredUnnoticed(now)) this.#instrumentation.lockLost(lock, new LockLostError(lock.resources, 'validity deadline passed'), heldMs);
      else this.#instrumentation.lockReleased(lock, heldMs);
    }
    return holding;
  }

  /** A lock's signal fires: reports the loss, once, unless it was released first or releaseAll fires it. */
  lost(lock: Lock, error: unknown): void {
    const instrumentation = this.#instrumentation;
    if (!instrumentation || this.#releasingAll || lock.released) return;
    const holding = holdingOf(lock);
    if (!holding || holding.ended) return;
    holding.ended = true;
    instrumentation.lockLost(lock, error, monotonicNow() - holding.heldSince);
  }

  /** Held, not released and still valid. */
  current(): Set<Lock> {
    this.#prune();
    return new Set(this.#held);
  }

  /** Fires every held lock's signal as released (not lost), and returns them to be released. */
  stopAll(reason: string): Lock[] {
    const locks = [...this.#held];
    this.#releasingAll = true;
    try {
      for (const lock of locks) lock.markLost(new LockLostError(lock.resources, reason));
    } finally {
      this.#releasingAll = false;
    }
    return locks;
  }

  #prune(): void {
    for (const lock of this.#held) {
      if (lock.remainingMs() > 0) continue;
      this.#held.delete(lock);
      // Expired with nobody listening and never released: the only place its loss is seen.
      if (this.#instrumentation && lock.expiredUnnoticed()) this.lost(lock, new LockLostError(lock.resources, 'validity deadline passed'));
    }
    this.#pruneAt = Math.max(64, this.#held.size * 2);
  }
}
