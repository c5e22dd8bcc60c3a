import { monotonicNow } from '../base/clock.js';
import { LockLostError } from '../base/errors.js';
import { autoExtend } from '../acquire/auto-extender.js';
import type { LeadershipEnd } from '../lock/instrumentation.js';
import type { Lock } from '../lock/lock.js';

export type { LeadershipEnd };

/** What a leadership tells its election. */
export interface LeadershipHooks {
  /** Each renewal that succeeded: the election refreshes its record of who leads. */
  renewed(): void;
  ended(end: LeadershipEnd): void;
}

/**
 * Leadership of an election, won by `campaign`: a term that lasts while its lease is renewed.
 * Its `signal` aborts when it ends, whichever way (the reason a LockLostError for a loss): give
 * it to the work that only the leader may do, and use `term` as the fencing token of that work's
 * writes.
 */
export class Leadership {
  /** The election's name. */
  readonly election: string;
  /** What this leader campaigned as. */
  readonly identity: string;
  /** This leader's term: larger than every earlier leader's of the election. */
  readonly term: number;
  /** When it was won (wall clock). */
  readonly since: Date;
  readonly #lock: Lock;
  readonly #leaseMs: number;
  readonly #hooks: LeadershipHooks;
  readonly #ends = new AbortController();
  readonly #startedAt = monotonicNow();
  #stopRenewing: (() => void) | undefined;
  #end: LeadershipEnd | undefined;

  /** @internal Leaderships come from `election.campaign()`. */
  constructor(lock: Lock, election: string, identity: string, leaseMs: number, hooks: LeadershipHooks) {
    this.#lock = lock;
    this.election = election;
    this.identity = identity;
    this.term = lock.fence ?? 0;
    this.since = new Date();
    this.#leaseMs = leaseMs;
    this.#hooks = hooks;
    this.signal = this.#ends.signal;
  }

  /** Aborts when this leadership ends: resigned, or lost (its reason then a LockLostError or the renewal's error). */
  readonly signal: AbortSignal;

  /** @internal Starts renewing, and watching for the end. */
  start(): void {
    // A microtask later: releaseAll marks its locks lost and releases them in one go, and a
    // release is a resignation, not a loss.
    this.#lock.onEnd((reason) => queueMicrotask(() => this.#ended(reason)));
    // As any lock kept alive while work runs, but renewed past maxExtensions (isLease).
    this.#stopRenewing = autoExtend(this.#lock, this.#leaseMs, () => this.#hooks.renewed());
  }

  /** False once it ended. */
  get isLeader(): boolean {
    return this.#end === undefined && this.#lock.remainingMs() > 0;
  }

  /** How long this leadership can still be relied on without another renewal, in ms; 0 once it ended. */
  remainingMs(): number {
    return this.#end ? 0 : this.#lock.remainingMs();
  }

  /** How long it has led (or led, once ended), in ms. */
  get heldMs(): number {
    return this.#end ? this.#end.heldMs : Math.round(monotonicNow() - this.#startedAt);
  }

  /**
   * Steps down: stops renewing and releases the lease, which wakes the next candidate at once.
   * Idempotent; never rejects (a lease already lost is simply over).
   */
  async resign(): Promise<void> {
    this.#stopRenewing?.();
    await this.#lock.release();
  }

  /** `await using leadership = await election.campaign(...)`: resigned when the block is left. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.resign();
  }

  #ended(reason: unknown): void {
    if (this.#end) return;
    this.#stopRenewing?.();
    const resigned = this.#lock.released;
    const heldMs = Math.round(monotonicNow() - this.#startedAt);
    const error = reason instanceof Error ? reason : new LockLostError(this.#lock.resources, String(reason));
    this.#end = {
      election: this.election,
      identity: this.identity,
      term: this.term,
      reason: resigned ? 'resigned' : 'lost',
      ...(resigned ? {} : { error }),
      heldMs,
    };
    this.#ends.abort(error);
    this.#hooks.ended(this.#end);
  }
}
