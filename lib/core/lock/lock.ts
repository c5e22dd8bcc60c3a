import { inspect } from 'node:util';
import { monotonicNow, validityLeftMs } from '../base/clock.js';
import { ExtensionLimitError, LockLostError, type RoundOutcomes } from '../base/errors.js';
import { WRITE, type LockKind, type LockMode } from './lock-kind.js';
import type { NodeOutcome } from '../base/node-outcome.js';
import { checkTtl, MAX_DELAY_MS, timerDelay } from '../base/argument-checks.js';
import { encodeHandle } from './lock-handle.js';

/** What a release did on each master. Releasing never throws: an expired lock is a normal case. */
export interface ReleaseResult {
  /**
   * How many masters had freed our keys when the release was decided: a quorum, or fewer when
   * the lock had been lost. The other masters' requests are sent too and land in `nodes` as
   * they answer; `release()` does not wait for them.
   */
  readonly releasedOn: number;
  /** True when a quorum still held our token at release, i.e. the lock had not been lost. */
  readonly heldUntilRelease: boolean;
  /**
   * True when the keys went straight to another caller of this process waiting for the same
   * resources, or stay with other readers of this process sharing the read hold, or went to
   * another process by `handOver()` (no round trip; the masters were not asked, so `nodes` is
   * empty).
   */
  readonly handedOver?: boolean;
  /** What each master did, as they answer (filled in after `release()` resolves, for the slower ones). */
  readonly nodes: readonly NodeOutcome[];
}

/**
 * @internal The release of a hold that stays held by another (a caller of this process it was
 * handed to or shared with, or another process): the masters were not asked.
 */
export const HANDED_OVER: ReleaseResult = Object.freeze({ releasedOn: 0, heldUntilRelease: true, nodes: Object.freeze([]), handedOver: true });

/** Told why a lock stopped being reliable: LockLostError for a release or a loss, or the error an extension failed with. */
export type LockEndListener = (reason: unknown) => void;

/** The engine side of a lock handle; kept narrow so the handle holds no engine internals. */
export interface LockEngine {
  extendLock(lock: Lock, ttlMs: number): Promise<void>;
  releaseLock(lock: Lock): Promise<ReleaseResult>;
  /** Told when the lock's signal fires, before its listeners run (for instrumentation). */
  lockLost?(lock: Lock, error: unknown): void;
  /** The lock leaves this engine for another (`lock.handOver()`): forgotten here, not released; throws to refuse. */
  handOverLock?(lock: Lock): void;
}

/** What a lock shows of itself when serialised or inspected: nothing that grants access. */
export interface LockSummary {
  /** The resources the lock holds. */
  readonly resources: readonly string[];
  /** Wall-clock estimate of when the validity ends (ISO 8601); null once expired, lost or released. */
  readonly validUntil: string | null;
  /** `remainingMs()` when the summary was made. */
  readonly remainingMs: number;
  /** The fencing token, when the acquisition asked for one. */
  readonly fence?: number;
  /** `'read'` for a reader; absent for an exclusive (write) lock. */
  readonly mode?: 'read';
  /** For a permit: the semaphore's limit. */
  readonly limit?: number;
  /** For a weighted permit: how many of the `limit` permits it holds. */
  readonly permits?: number;
  /** For a permit: which of the `limit` slots it holds, per resource (`permits` each, resource by resource). */
  readonly slots?: readonly number[];
}

/**
 * A held Redlock. Valid until `remainingMs()` reaches 0 on this process's monotonic clock,
 * measured from before the acquire round was sent, less drift.
 *
 * The engine (and through it every master's client and password) and the token live in true
 * private fields: a handler that returns a lock, `JSON.stringify(lock)` or `util.inspect(lock)`
 * shows only the summary.
 */
export class Lock {
  readonly #engine: LockEngine;
  readonly #token: string;
  #deadline: number;
  #ttlMs: number;
  #extensions = 0;
  #release: Promise<ReleaseResult> | undefined;
  #lost: AbortController | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #holding: unknown;
  /** The acquire call's failed rounds, if any, and the round that won it: `rounds` is made of them when read. */
  #failedRounds: readonly RoundOutcomes[] | undefined;
  #winningRound: RoundOutcomes | undefined;
  #lastExtension: RoundOutcomes | undefined;
  /** Told once when the lock stops being reliable, released or lost: work nested under it (see onEnd). */
  #endListeners: Set<LockEndListener> | undefined;

  /** What the lock is (a writer, a reader, a permit), for its engine; users read `mode` and `limit`. @internal */
  readonly kind: LockKind;

  /** @internal Locks come from an engine's acquire, never from `new`. */
  constructor(
    engine: LockEngine,
    /** The resources this lock holds, all together. */
    readonly resources: readonly string[],
    /** The Redis keys, `keyPrefix` + resource. */
    readonly keys: readonly string[],
    token: string,
    ttlMs: number,
    deadline: number,
    /** Fencing token, when the acquisition asked for one. */
    readonly fence?: number,
    /** An exclusive lock (a writer), a reader, or a permit of a semaphore. */
    kind: LockKind = WRITE,
    /** For a permit: which of the `limit` slots it holds, per resource (`permits` each, resource by resource). */
    readonly slots?: readonly number[],
  ) {
    this.#engine = engine;
    this.kind = kind;
    this.#token = token;
    this.#ttlMs = ttlMs;
    this.#deadline = deadline;
  }

  /** The random value that marks this lock's keys on the masters. Whoever has it can release the lock. */
  get token(): string {
    return this.#token;
  }

  /** `'read'` for a reader; `'write'` for the exclusive lock and for a semaphore's permit. */
  get mode(): LockMode {
    return this.kind.mode;
  }

  /** How many holders the resource admits at once: a semaphore's `limit`, else 1. */
  get limit(): number {
    return this.kind.limit;
  }

  /** How many of the semaphore's permits this hold takes (the `permits` it was acquired with), else 1. */
  get permits(): number {
    return this.kind.permits;
  }

  /** The ttl of the last acquire or extend. */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /** How many times the lock was extended (bounded by `maxExtensions`). */
  get extensions(): number {
    return this.#extensions;
  }

  /**
   * @internal An election leader's lease: renewed for as long as the leader lives, so
   * `maxExtensions` (which keeps a forgotten lock from being extended for ever) does not apply.
   */
  isLease = false;

  /**
   * What every master did in each acquire round of the call that got this lock, oldest first,
   * the winning round last (node-redlock's `attempts`); empty when it came without a round of
   * its own (handed over by a caller of this process, granted by a release on the masters, or a
   * reader that joined the hold of another reader of this process).
   */
  get rounds(): readonly RoundOutcomes[] {
    const won = this.#winningRound;
    if (!won) return [];
    return this.#failedRounds ? [...this.#failedRounds, won] : [won];
  }

  /** @internal Set once by the acquire call that got the lock (kept as given: nothing is built per acquire). */
  recordRounds(failed: readonly RoundOutcomes[] | undefined, won: RoundOutcomes | undefined): void {
    this.#failedRounds = failed;
    this.#winningRound = won;
  }

  /** True once `release()` was called. */
  get released(): boolean {
    return this.#release !== undefined;
  }

  /** Milliseconds this lock can still be relied on; 0 once expired, lost or released. */
  remainingMs(): number {
    if (this.#release || this.#lost?.signal.aborted) return 0;
    return Math.max(0, this.#deadline - monotonicNow());
  }

  /**
   * Throws LockLostError unless the lock stays valid for at least `minMs` more: call it just
   * before a side effect that must not happen without the lock.
   */
  assertValid(minMs = 0): void {
    const reason = this.#lost?.signal.reason;
    if (reason instanceof LockLostError) throw reason;
    if (this.#release) throw new LockLostError(this.resources, 'released');
    const remaining = this.remainingMs();
    if (remaining <= minMs) {
      throw new LockLostError(this.resources, `${Math.round(remaining)} ms of validity left, ${minMs} ms required`);
    }
  }

  /**
   * Fires when the lock must no longer be relied on: its validity deadline passed, or an
   * automatic extension failed. Its reason is the RedlockError that says why.
   */
  get signal(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      this.#armDeadline();
    }
    return this.#lost.signal;
  }

  /** Extends on a quorum, recomputing validity from the extension round. */
  async extend(ttlMs: number = this.#ttlMs): Promise<this> {
    await this.#engine.extendLock(this, ttlMs);
    return this;
  }

  /** Compare-and-delete on every master. Idempotent; never throws for an expired lock. */
  release(): Promise<ReleaseResult> {
    if (!this.#release) {
      clearTimeout(this.#deadlineTimer);
      this.#release = this.#engine.releaseLock(this);
      // After the release is under way (a listener may call release again), before anyone else can hold the keys.
      if (this.#endListeners) this.#ended(new LockLostError(this.resources, 'released'));
    }
    return this.#release;
  }

  /**
   * Hands this lock to another process or engine on the same masters: returns a handle that
   * `redlock.adopt(handle)` there takes up, to extend and release the lock, with the same fence.
   * From now on this `Lock` is done with here, as if released, but the masters keep it: it is no
   * longer extended (by `using`, `enter` or `@WithLock` either), `release()` and `releaseAll`
   * leave it be, `remainingMs()` is 0. Its signal does not fire.
   *
   * The handle carries the lock's token: whoever has it can extend and release the lock. Pass it
   * as you would a credential, and never log it.
   *
   * Throws LockLostError, and the lock stays held here, when it is released or expired, when its
   * engine cannot hand locks over, and for a reader that shares its hold on the masters with other
   * readers of this process still holding (the other process could release it under them).
   */
  handOver(): string {
    if (this.#release) throw new LockLostError(this.resources, 'released, or handed over already');
    if (this.remainingMs() <= 0) throw new LockLostError(this.resources, 'validity expired before the hand-over');
    if (!this.#engine.handOverLock) throw new LockLostError(this.resources, 'its engine cannot hand locks over');
    const { resources, kind, fence, slots } = this;
    const handle = encodeHandle({ resources, token: this.#token, kind, ttlMs: this.#ttlMs, fence, slots });
    // First: the engine may refuse (a reader sharing its hold with others of this process), and the lock stays held.
    this.#engine.handOverLock(this);
    clearTimeout(this.#deadlineTimer);
    this.#release = Promise.resolve(HANDED_OVER);
    if (this.#endListeners) this.#ended(new LockLostError(this.resources, 'handed over to another process'));
    return handle;
  }

  /**
   * `await using lock = await redlock.acquire(...)`: released when the block is left, however
   * it is left (TypeScript 5.2+, Node 20.19+).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /**
   * @internal Calls `listener` once when the lock stops being reliable: released, or lost (its
   * signal fires), or at once if it already has. Unlike `signal`, a release counts: this is for
   * work that runs under another's hold (reentrant or nested sessions), which must not carry on
   * as if the lock were held once its owner let it go. Arms the deadline, so expiry is noticed.
   */
  onEnd(listener: LockEndListener): void {
    if (this.#release) return listener(new LockLostError(this.resources, 'released'));
    const signal = this.signal;
    if (signal.aborted) return listener(signal.reason);
    (this.#endListeners ??= new Set()).add(listener);
  }

  /** @internal Undoes `onEnd`: the work that listened is over. */
  offEnd(listener: LockEndListener): void {
    this.#endListeners?.delete(listener);
  }

  /** @internal What the engine that holds this lock keeps about it (how it was had), opaque to anyone else. */
  get holding(): unknown {
    return this.#holding;
  }

  // @internal with its getter (TSDoc takes a property's comment from the getter only).
  set holding(holding: unknown) {
    this.#holding = holding;
  }

  /** @internal What every master did in the last extension that succeeded (the node-redlock entry's votes). */
  get lastExtension(): RoundOutcomes | undefined {
    return this.#lastExtension;
  }

  /** @internal Called by the engine after a successful extension. */
  renewed(deadline: number, ttlMs: number, outcomes?: RoundOutcomes): void {
    this.#lastExtension = outcomes;
    this.#deadline = deadline;
    this.#ttlMs = ttlMs;
    this.#extensions++;
    if (this.#lost && !this.#lost.signal.aborted) this.#armDeadline();
  }

  /**
   * @internal Called by the engine for an extension to `ttlMs` that may have reached some masters
   * (from the moment it is sent, and again if it fails): a shorter ttl may now stand on them, so
   * only the earlier of the two deadlines is certain. Fires the signal when that has passed.
   */
  narrowed(deadline: number, ttlMs: number): void {
    if (deadline >= this.#deadline) return;
    this.#deadline = deadline;
    if (deadline <= monotonicNow()) {
      const why = `an extension to ${ttlMs} ms may have shortened the lock on some masters`;
      this.markLost(new LockLostError(this.resources, why));
    } else if (this.#lost && !this.#lost.signal.aborted) {
      this.#armDeadline();
    }
  }

  /** What `JSON.stringify(lock)` shows: the summary, never the token or the engine. */
  toJSON(): LockSummary {
    const remainingMs = Math.floor(this.remainingMs());
    return {
      resources: this.resources,
      validUntil: remainingMs > 0 ? new Date(Date.now() + remainingMs).toISOString() : null,
      remainingMs,
      ...(this.fence === undefined ? {} : { fence: this.fence }),
      ...(this.kind.mode === 'read' ? { mode: this.kind.mode } : {}),
      ...(this.kind.limit > 1 ? { limit: this.kind.limit, ...(this.kind.permits > 1 ? { permits: this.kind.permits } : {}), slots: this.slots } : {}),
    };
  }

  /** What `util.inspect(lock)` and `console.log(lock)` show: the summary. */
  [inspect.custom](_depth: number, options: object): string {
    return `Lock ${inspect(this.toJSON(), options)}`;
  }

  /** @internal Fires the lost-lock signal with the error that explains it. */
  markLost(error: LockLostError | Error): void {
    clearTimeout(this.#deadlineTimer);
    this.#lost ??= new AbortController();
    if (this.#lost.signal.aborted) return;
    // First: a listener may release the lock, and the loss must be known before the release.
    this.#engine.lockLost?.(this, error);
    this.#lost.abort(error);
    this.#ended(error);
  }

  #ended(reason: unknown): void {
    const listeners = this.#endListeners;
    this.#endListeners = undefined;
    if (listeners) for (const listener of listeners) listener(reason);
  }

  /**
   * @internal Whether the lock ran out of validity without its signal firing (nobody armed it),
   * as of `now`; false once the signal has fired.
   */
  expiredUnnoticed(now = monotonicNow()): boolean {
    return !this.#lost?.signal.aborted && this.#deadline <= now;
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    if (this.#release) return;
    const remaining = this.#deadline - monotonicNow();
    const expire = () => this.markLost(new LockLostError(this.resources, 'validity deadline passed'));
    if (remaining <= 0) {
      expire();
      return;
    }
    // A deadline beyond a timer's reach (a ttl over 24.8 days, with maxTtlMs raised) is looked at again then.
    this.#deadlineTimer = setTimeout(remaining > MAX_DELAY_MS ? () => this.#armDeadline() : expire, timerDelay(Math.ceil(remaining)));
    this.#deadlineTimer.unref();
  }
}

/**
 * What every engine does before it sends an extension of `lock` to `ttlMs`: refuses one that
 * cannot be (a bad ttl, a released lock, one past its validity, one over `maxExtensions`), then
 * narrows the lock, since from the moment it is sent a master may apply the new ttl, shorter
 * than the old one perhaps: until the round says more, only the earlier deadline is certain.
 * Returns when the extension started, on the monotonic clock.
 */
export function startExtension(
  lock: Lock,
  ttlMs: number,
  options: { readonly maxExtensions: number; readonly driftFactor: number; readonly maxTtlMs: number },
): number {
  checkTtl('ttlMs', ttlMs, options.maxTtlMs);
  if (lock.released) throw new LockLostError(lock.resources, 'released');
  // A lock past its validity may already belong to someone else; reviving it would hide that.
  if (lock.remainingMs() <= 0) throw new LockLostError(lock.resources, 'validity expired before the extension');
  if (!lock.isLease && lock.extensions >= options.maxExtensions) throw new ExtensionLimitError(lock.resources, options.maxExtensions);
  const start = monotonicNow();
  lock.narrowed(start + validityLeftMs(ttlMs, start, start, options.driftFactor), ttlMs);
  return start;
}
