import { monotonicNow } from '../base/clock.js';
import {
  AcquireAbortedError,
  ExtensionLimitError,
  InvalidArgumentError,
  LockHeldError,
  LockLostError,
  QuorumUnreachableError,
} from '../base/errors.js';
import type {
  AcquireObserver,
  AcquireOutcome,
  CallObserver,
  CallOutcome,
  ExtensionOutcome,
  LeadershipEnd,
  LostReason,
  MasterAddress,
  MasterFailure,
  MasterOperation,
  RedlockInstrumentation,
} from './instrumentation.js';
import type { Lock } from './lock.js';
import { redactCredentials } from '../base/redact.js';

interface Logger {
  warn(message: string): void;
}

/**
 * How the engine and the Nest layer call the application's instrumentation hooks: absent hooks
 * cost nothing, and a hook that throws is logged once and never breaks a lock operation (a
 * throw between a grant and its caller would leave a lock held on the masters until its ttl).
 */
export class InstrumentationGuard {
  readonly #hooks: RedlockInstrumentation;
  readonly #logger: Logger;
  readonly #reported = new Set<string>();

  constructor(hooks: RedlockInstrumentation, logger: Logger) {
    this.#hooks = hooks;
    this.#logger = logger;
  }

  /** `startedAt`: the call's start on the monotonic clock, which the caller has just read. */
  acquireStarted(resources: readonly string[], ttlMs: number, startedAt: number): GuardedAcquire | undefined {
    if (!this.#hooks.acquireStarted) return undefined;
    try {
      const observer = this.#hooks.acquireStarted(resources, ttlMs);
      return observer ? new GuardedAcquire(observer, this, startedAt) : undefined;
    } catch (error) {
      this.failed('acquireStarted', error);
      return undefined;
    }
  }

  lockHeld(lock: Lock): void {
    try {
      this.#hooks.lockHeld?.(lock);
    } catch (error) {
      this.failed('lockHeld', error);
    }
  }

  lockReleased(lock: Lock, heldMs: number): void {
    try {
      this.#hooks.lockReleased?.(lock, heldMs);
    } catch (error) {
      this.failed('lockReleased', error);
    }
  }

  lockLost(lock: Lock, error: unknown, heldMs: number): void {
    try {
      this.#hooks.lockLost?.(lock, lostReason(error), error, heldMs);
    } catch (thrown) {
      this.failed('lockLost', thrown);
    }
  }

  extensionEnded(lock: Lock, outcome: ExtensionOutcome): void {
    try {
      this.#hooks.extensionEnded?.(lock, outcome);
    } catch (error) {
      this.failed('extensionEnded', error);
    }
  }

  leadershipWon(election: string, identity: string, term: number): void {
    try {
      this.#hooks.leadershipWon?.(election, identity, term);
    } catch (error) {
      this.failed('leadershipWon', error);
    }
  }

  leadershipEnded(end: LeadershipEnd): void {
    try {
      this.#hooks.leadershipEnded?.(end);
    } catch (error) {
      this.failed('leadershipEnded', error);
    }
  }

  /** Whether masterFailed is implemented: rounds skip their failure bookkeeping when it is not. */
  get watchesMasters(): boolean {
    return this.#hooks.masterFailed !== undefined;
  }

  masterFailed(master: MasterAddress, failure: MasterFailure, operation: MasterOperation): void {
    try {
      this.#hooks.masterFailed?.(master, failure, operation);
    } catch (error) {
      this.failed('masterFailed', error);
    }
  }

  callStarted(site: string): GuardedCall | undefined {
    if (!this.#hooks.callStarted) return undefined;
    try {
      const observer = this.#hooks.callStarted(site);
      return observer ? new GuardedCall(observer, this) : undefined;
    } catch (error) {
      this.failed('callStarted', error);
      return undefined;
    }
  }

  /** @internal */
  failed(hook: string, error: unknown): void {
    if (this.#reported.has(hook)) return;
    this.#reported.add(hook);
    const text = redactCredentials(error instanceof Error ? error.message : String(error));
    this.#logger.warn(`redlock: instrumentation hook ${hook} threw (${text}); ignored, and not reported again`);
  }
}

/**
 * One acquire call's observer, guarded like the hooks; `waiting` reaches it once at most. It keeps
 * the call's times, so that observers are told durations and need no clock reads of their own.
 */
export class GuardedAcquire {
  readonly #observer: AcquireObserver;
  readonly #guard: InstrumentationGuard;
  readonly #startedAt: number;
  #waitingSince = -1;

  constructor(observer: AcquireObserver, guard: InstrumentationGuard, startedAt: number) {
    this.#observer = observer;
    this.#guard = guard;
    this.#startedAt = startedAt;
  }

  round(granted: number, durationMs: number): void {
    try {
      this.#observer.round?.(granted, durationMs);
    } catch (error) {
      this.#guard.failed('AcquireObserver.round', error);
    }
  }

  handedOff(granted: number): void {
    try {
      this.#observer.handedOff?.(granted);
    } catch (error) {
      this.#guard.failed('AcquireObserver.handedOff', error);
    }
  }

  waiting(): void {
    if (this.#waitingSince >= 0) return;
    this.#waitingSince = monotonicNow();
    try {
      this.#observer.waiting?.();
    } catch (error) {
      this.#guard.failed('AcquireObserver.waiting', error);
    }
  }

  /** `endedAt`: when it ended on the monotonic clock, if the caller has just read it (a lock's grant). */
  ended(outcome: AcquireOutcome, error?: unknown, endedAt = monotonicNow()): void {
    const waitingSince = this.#waitingSince;
    try {
      this.#observer.ended?.(outcome, error, endedAt - this.#startedAt, waitingSince >= 0 ? endedAt - waitingSince : undefined);
    } catch (thrown) {
      this.#guard.failed('AcquireObserver.ended', thrown);
    }
  }

  /** Ends the observation of a call that failed with `error`; `waits`: the caller would have waited. */
  failed(error: unknown, waits: boolean): void {
    this.ended(acquireOutcome(error, waits), error);
  }
}

/** One decorated call's observer; only the first `ended` reaches it. */
export class GuardedCall {
  readonly #observer: CallObserver;
  readonly #guard: InstrumentationGuard;
  #ended = false;

  constructor(observer: CallObserver, guard: InstrumentationGuard) {
    this.#observer = observer;
    this.#guard = guard;
  }

  /** Not guarded: what throws here is the call itself. */
  run<T>(work: () => T): T {
    return this.#observer.run ? this.#observer.run(work) : work();
  }

  ended(outcome: CallOutcome, error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    try {
      this.#observer.ended?.(outcome, error);
    } catch (thrown) {
      this.#guard.failed('CallObserver.ended', thrown);
    }
  }
}

export function acquireOutcome(error: unknown, waits: boolean): AcquireOutcome {
  if (error instanceof LockHeldError) return waits ? 'timed_out' : 'held';
  if (error instanceof QuorumUnreachableError) return 'unreachable';
  if (error instanceof AcquireAbortedError) return 'aborted';
  return 'error';
}

/** Undefined for a call that was not an extension at all (a bad ttl, a lock already released). */
export function extensionOutcome(error: unknown): ExtensionOutcome | undefined {
  if (error instanceof InvalidArgumentError) return undefined;
  if (error instanceof LockLostError && error.reason === 'released') return undefined;
  if (error instanceof ExtensionLimitError) return 'limit';
  if (error instanceof QuorumUnreachableError) return 'unreachable';
  return 'lost';
}

/** A LockLostError that names the masters came from an extension they refused; other ones from running out of validity. */
export function lostReason(error: unknown): LostReason {
  if (error instanceof ExtensionLimitError) return 'extension_limit';
  if (error instanceof LockLostError) return error.nodes.length > 0 ? 'refused' : 'expired';
  return 'error';
}
