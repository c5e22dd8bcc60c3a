import { monotonicNow, validityLeftMs } from '../base/clock.js';
import { LockHeldError, LockLostError } from '../base/errors.js';
import { extensionOutcome } from '../lock/instrumentation-guard.js';
import { Lock, startExtension, type LockEngine, type ReleaseResult } from '../lock/lock.js';
import { decodeHandle } from '../lock/lock-handle.js';
import { checkResources, checkTtl } from '../base/argument-checks.js';
import { resolveWait } from '../lock/redlock-options.js';
import { Waiter } from '../waiting/waiter.js';
import { roundFailure } from '../rounds/round-failure.js';
import { checkCall, oneRound, type AcquireOptions, type LockedRoutine, type TryAcquireOptions, type UsingOptions } from '../lock/acquire-options.js';
import type { Acquisition, HeldLocks } from './held-locks.js';
import { LockAcquirer, type AcquirerParts } from './lock-acquirer.js';
import type { HeldBy } from '../kinds/hold-kind.js';
import { enterSession, runInSession, type LockSession, type SessionEngine } from './lock-session.js';

/** What an engine core is made of: the acquire path's parts, and the register of the locks its engine holds. */
export interface CoreParts extends AcquirerParts {
  readonly held: HeldLocks;
}

/**
 * What a lock engine does whatever its masters are, so that Redlock (Redis masters) and
 * InMemoryRedlock (lib/testing: the masters modelled in the process) run the same code: the
 * acquire loop and sessions, the held locks, releaseAll, and a lock's extension and release,
 * each decided from the round its kind ran. An engine builds the parts over its own masters
 * (its kinds above all) and passes its public calls, and its locks' (LockEngine), on to this.
 */
export class EngineCore {
  readonly #parts: CoreParts;
  readonly #acquirer: LockAcquirer;
  readonly #sessions: SessionEngine;

  readonly #engine: LockEngine;

  constructor(
    /** The engine: what sessions are scoped by (currentScope), and what adopted locks call back. */
    engine: LockEngine,
    parts: CoreParts,
  ) {
    this.#engine = engine;
    this.#parts = parts;
    this.#acquirer = new LockAcquirer(parts);
    const acquireChecked = (list: string[], ttlMs: number, options: UsingOptions) => {
      parts.quarantine?.observeTtl(ttlMs);
      return this.#acquirer.acquire(list, ttlMs, options, true);
    };
    this.#sessions = { engine, maxResources: parts.options.maxResources, maxTtlMs: parts.options.maxTtlMs, acquireChecked };
  }

  /**
   * A call's bad argument rejects the promise, as everything else that goes wrong does. Not an
   * async function: one returning the acquirer's promise would cost every acquire two more
   * microtasks to adopt it.
   */
  acquire(resources: string | readonly string[], ttlMs: number, options: AcquireOptions): Promise<Lock> {
    let list: string[];
    try {
      list = checkCall(resources, ttlMs, options, this.#parts.options);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#parts.quarantine?.observeTtl(ttlMs);
    return this.#acquirer.acquire(list, ttlMs, options, true);
  }

  async tryAcquire(resources: string | readonly string[], ttlMs: number, options: TryAcquireOptions): Promise<Lock | null> {
    const list = checkCall(resources, ttlMs, options, this.#parts.options);
    this.#parts.quarantine?.observeTtl(ttlMs);
    return this.#oneRound(list, ttlMs, options);
  }

  async #oneRound(list: string[], ttlMs: number, options: TryAcquireOptions): Promise<Lock | null> {
    try {
      return await this.#acquirer.acquire(list, ttlMs, oneRound(options), false);
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  /**
   * One round for the lock; won, it is left to expire: never extended, never released (releaseAll
   * included), so nobody else can take it for `ttlMs` whatever this process does next.
   *
   * Its ttl does not lengthen the restart quarantine's window: a daily job's claim lives a day,
   * and a window of a day would stop every lock of the app whenever a master is younger than
   * that (and lose the locks held when the claim is made, their extensions refused). What a
   * master forgets of a claim matters only to a replica that claims the same tick again after
   * the restart, later than the window (docs/jobs-and-transports.md, "Once per tick").
   */
  async claim(resources: string | readonly string[], ttlMs: number): Promise<boolean> {
    const lock = await this.#oneRound(checkCall(resources, ttlMs, {}, this.#parts.options), ttlMs, {});
    if (!lock) return false;
    // Done with, as far as this engine goes: its end is reported now, and nothing will release it.
    this.#parts.held.release(lock);
    return true;
  }

  using<T>(resources: string | readonly string[], ttlMs: number, routine: LockedRoutine<T>, options: UsingOptions): Promise<T> {
    return runInSession(() => this.enter(resources, ttlMs, options), routine);
  }

  enter(resources: string | readonly string[], ttlMs: number, options: UsingOptions): Promise<LockSession> {
    return enterSession(this.#sessions, resources, ttlMs, options);
  }

  get heldLocks(): ReadonlySet<Lock> {
    return this.#parts.held.current();
  }

  async releaseAll(reason: string): Promise<void> {
    // Waiting calls give up first (AcquireAbortedError with `reason`), so that no lock released
    // below is handed over to one of them, and they leave the masters' queues while the
    // connections are still open: an entry left behind would be granted the next release there
    // (server-side hand-off) and block the lock for its ttl.
    const leaving = this.#acquirer.abandonAll(reason);
    const locks = this.#parts.held.stopAll(reason);
    await Promise.all([...locks.map((lock) => lock.release()), leaving]);
  }

  extendLock(lock: Lock, ttlMs: number): Promise<void> {
    const instrumentation = this.#parts.instrumentation;
    if (!instrumentation) return this.#extend(lock, ttlMs);
    return this.#extend(lock, ttlMs).then(
      () => instrumentation.extensionEnded(lock, 'extended'),
      (error: unknown) => {
        const outcome = extensionOutcome(error);
        if (outcome) instrumentation.extensionEnded(lock, outcome);
        throw error;
      },
    );
  }

  /** A lock's signal fires: reports the loss, once per lock, unless the lock was released first or releaseAll is firing it. */
  lockLost(lock: Lock, error: unknown): void {
    this.#parts.held.lost(lock, error);
  }

  releaseLock(lock: Lock): Promise<ReleaseResult> {
    return this.#parts.kinds.of(lock.kind).release(lock, this.#forget(lock));
  }

  /** The lock leaves for another process (`lock.handOver()`): forgotten here, its end reported, nothing given back. */
  handOverLock(lock: Lock): void {
    const kind = this.#parts.kinds.of(lock.kind);
    const refusal = kind.handOverRefusal?.(lock);
    if (refusal) throw new LockLostError(lock.resources, refusal);
    kind.handAway(lock, this.#forget(lock));
  }

  /** The lock leaves the register of held locks (its end reported); how it was had, for its kind. */
  #forget(lock: Lock): HeldBy | undefined {
    const acquisition = this.#parts.held.release(lock);
    return acquisition && { round: acquisition.round, waiter: acquisition.waiter, waiterId: enlisted(acquisition) ? acquisition.waiter.id : '' };
  }

  /**
   * Takes up a lock another engine handed over (`lock.handOver()`). Its validity here is this
   * engine's own: the lock is extended to `ttlMs` (the handle's ttl by default) in a round of
   * this engine, and its validity counts from before that round, on this process's clock.
   */
  async adopt(handle: string, ttlMs?: number): Promise<Lock> {
    const content = decodeHandle(handle);
    const { options, names } = this.#parts;
    const ttl = checkTtl('ttlMs', ttlMs ?? content.ttlMs, options.maxTtlMs);
    const resources = checkResources(content.resources, options.maxResources);
    const keys = resources.map((resource) => names.lock(resource));
    const { token, fence, kind, slots } = content;
    const lock = new Lock(this.#engine, resources, keys, token, ttl, monotonicNow() + ttl, fence, kind, slots);
    this.#parts.quarantine?.observeTtl(ttl);
    try {
      await this.#extend(lock, ttl);
    } catch (error) {
      if (!(error instanceof LockLostError)) throw error;
      throw new LockLostError(resources, 'the handed-over lock is not held on a majority of these masters (it expired or was released, or these masters name their keys otherwise)');
    }
    this.#parts.held.add(lock, undefined, new Waiter(false, undefined, [], resolveWait({}, options), undefined), false);
    return lock;
  }

  async #extend(lock: Lock, ttlMs: number): Promise<void> {
    const { options, quorum } = this.#parts;
    const start = startExtension(lock, ttlMs, options);
    this.#parts.quarantine?.observeTtl(ttlMs);
    const round = await this.#parts.kinds.of(lock.kind).extend(lock, ttlMs);
    const end = monotonicNow();
    const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
    if (round.granted >= quorum && left > 0) {
      lock.renewed(end + left, ttlMs, round.outcomes);
      return;
    }
    // Failed, but any master that got the request may hold the new ttl: what every outcome leaves
    // true is the earlier deadline, counted as for a success.
    if (round.outcomes.some((outcome) => outcome.status !== 'quarantined')) lock.narrowed(end + left, ttlMs);
    const failure = roundFailure(lock.resources, round, quorum, left, 0);
    if (failure.error instanceof LockHeldError) {
      const lost = new LockLostError(lock.resources, 'a majority of masters no longer holds this lock', round.outcomes);
      lock.markLost(lost);
      throw lost;
    }
    throw failure.error;
  }
}

/**
 * Whether a master may hold a queue entry of the lock's waiter: one refused it in an earlier
 * round, or in the winning one, or may still do so (a straggler whose outcome has not landed
 * refuses after the decision). Such an entry would stand ahead of the other waiters until
 * cleared; only when every master is known to have granted is there certainly none.
 */
function enlisted(acquisition: Acquisition): boolean {
  return acquisition.waiter.enlisted || (acquisition.queuing && acquisition.round!.outcomes.some((o) => o.status !== 'granted'));
}
