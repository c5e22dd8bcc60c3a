import { EventEmitter } from 'node:events';
import { monotonicNow, validityLeftMs } from '../core/base/clock.js';
import {
  AcquireAbortedError,
  InvalidArgumentError,
  LockHeldError,
  LockKindMismatchError,
  LockLostError,
  QuorumUnreachableError,
  type RedlockError,
} from '../core/base/errors.js';
import { LocalQueue } from '../core/waiting/local-queue.js';
import { Lock, startExtension, type LockEngine, type ReleaseResult } from '../core/lock/lock.js';
import { enterSession, LockSession, runInSession, type SessionEngine } from '../core/acquire/lock-session.js';
import type { MastersHealth } from '../core/voters/master-health.js';
import type { NodeOutcome } from '../core/base/node-outcome.js';
import { checkCall, oneRound, type AcquireOptions, type LockedRoutine, type UsingOptions } from '../core/lock/acquire-options.js';
import type { RedlockEngine } from '../core/redlock-engine.js';
import { resolveOptions, resolveWait, type RedlockOptions, type ResolvedRedlockOptions } from '../core/lock/redlock-options.js';
import { checkProbeTimeout, checkResources, checkTtl } from '../core/base/argument-checks.js';
import { roundFailure, type RoundFailure } from '../core/rounds/round-failure.js';
import { newToken } from '../core/base/token.js';
import { describeKind, kindOf, type LockKind } from '../core/lock/lock-kind.js';
import { MemoryLockStore, type QueueTicket } from './memory-lock-store.js';

/** The one stand-in master, as errors and health reports name it. */
export const IN_MEMORY_MASTER = 'in-memory';

const UNREACHABLE = 'unreachable (InMemoryRedlock.makeQuorumUnreachable)';

/** As in the real engine: rounds that found too few masters are retried this often only, then fail fast. */
const UNREACHABLE_RETRIES = 2;

/** Options of `InMemoryRedlock.holdElsewhere`: how long the pretended other owner holds. */
export interface HoldElsewhereOptions {
  /** The other owner's ttl: the key expires after it, as a crashed holder's would. Default: held until `releaseElsewhere`. */
  ttlMs?: number;
}

/**
 * The lock engine of `RedlockModule`, modelled in one process for unit tests: no Redis, the same
 * contract. The same `Lock` objects (extend, release, signal, fence), the same errors
 * (`LockHeldError` with `retryAfterMs`, `QuorumUnreachableError`, `AcquireAbortedError`,
 * `LockLostError`, `InvalidArgumentError` from the same argument checks), reentrancy through the
 * same async context, waiting per `waitTimeoutMs` / `retryCount` woken by releases, first come
 * first served, ttl expiry and auto-extension on the process's timers and `performance.now()`
 * (fake timers move them), and fencing tokens that increase.
 *
 * It stands for a quorum of masters as one: `quorum` is 1 and `nodes` is empty. What a test
 * cannot make happen with real calls, it makes happen with the controls: another owner holding
 * a resource (`holdElsewhere`), the masters out of reach (`makeQuorumUnreachable`), a held lock
 * lost (`loseLock`).
 */
export class InMemoryRedlock extends EventEmitter implements RedlockEngine, LockEngine {
  readonly options: ResolvedRedlockOptions;
  readonly quorum = 1;
  readonly nodes: readonly never[] = [];
  readonly #store = new MemoryLockStore();
  readonly #localQueue = new LocalQueue();
  readonly #held = new Set<Lock>();
  /** Per resource, the token another owner holds it with (holdElsewhere). */
  readonly #elsewhere = new Map<string, string>();
  /** Per resource, how many callers wait for it now. */
  readonly #waiting = new Map<string, number>();
  /** Per call that may wait, from its start: what makes it give up when releaseAll runs. */
  readonly #waitingCalls = new Set<AbortController>();
  readonly #sessions: SessionEngine;
  #tickets = 0;
  #pruneHeldAt = 64;

  constructor(options: RedlockOptions = {}) {
    super();
    this.options = resolveOptions(options);
    const acquireChecked = (list: string[], ttlMs: number, options: UsingOptions) => this.#acquire(list, ttlMs, options, true);
    this.#sessions = { engine: this, maxResources: this.options.maxResources, acquireChecked };
  }

  async acquire(resources: string | readonly string[], ttlMs: number, options: AcquireOptions = {}): Promise<Lock> {
    return this.#acquire(checkCall(resources, ttlMs, options, this.options.maxResources), ttlMs, options, true);
  }

  async tryAcquire(
    resources: string | readonly string[],
    ttlMs: number,
    options: Pick<AcquireOptions, 'fencing' | 'mode' | 'limit'> = {},
  ): Promise<Lock | null> {
    const list = checkCall(resources, ttlMs, options, this.options.maxResources);
    try {
      return await this.#acquire(list, ttlMs, oneRound(options), false);
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  using<T>(resources: string | readonly string[], ttlMs: number, routine: LockedRoutine<T>, options: UsingOptions = {}): Promise<T> {
    return runInSession(() => this.enter(resources, ttlMs, options), routine);
  }

  enter(resources: string | readonly string[], ttlMs: number, options: UsingOptions = {}): Promise<LockSession> {
    return enterSession(this.#sessions, resources, ttlMs, options);
  }

  expectTtl(ttlMs: number): void {
    checkTtl('ttlMs', ttlMs);
  }

  /** Nothing to verify: there are no masters to be listed twice. */
  async verifyMasters(): Promise<void> {}

  /** One stand-in master, reachable unless the test made the quorum unreachable. */
  async checkMasters(timeoutMs = 1_000): Promise<MastersHealth> {
    checkProbeTimeout(timeoutMs);
    const reachable = this.#store.reachable;
    const master = reachable
      ? { node: IN_MEMORY_MASTER, reachable, roundTripMs: 0, votes: true }
      : { node: IN_MEMORY_MASTER, reachable, votes: false, error: UNREACHABLE };
    return { quorum: this.quorum, voting: reachable ? 1 : 0, available: reachable, availableInMs: reachable ? 0 : undefined, masters: [master] };
  }

  get heldLocks(): ReadonlySet<Lock> {
    return new Set([...this.#held].filter((lock) => lock.remainingMs() > 0));
  }

  /** As the real engine's: waiting calls give up first (AcquireAbortedError), so none is handed a lock released here. */
  async releaseAll(reason = 'released at shutdown'): Promise<void> {
    for (const call of this.#waitingCalls) call.abort(reason);
    this.#waitingCalls.clear();
    const locks = [...this.#held];
    for (const lock of locks) lock.markLost(new LockLostError(lock.resources, reason));
    await Promise.all(locks.map((lock) => lock.release()));
  }

  /** Nothing to close: the engine opens no connection. */
  close(): void {}

  // ---- controls for tests ------------------------------------------------------------------

  /**
   * Another owner (another replica of the app, say) now holds `resources`: this app's callers are
   * refused (`LockHeldError`, 409 over HTTP, with `retryAfterMs` its remaining ttl) or wait, as
   * their policy says, until `releaseElsewhere` or the ttl runs out. Throws for a resource a lock
   * of this app holds (use `loseLock` first: two owners at once is what a lock prevents).
   */
  holdElsewhere(resources: string | readonly string[], options: HoldElsewhereOptions = {}): void {
    const list = checkResources(resources, this.options.maxResources);
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('options', options, 'expected an object like { ttlMs: 30_000 }');
    }
    const ttlMs = options.ttlMs === undefined ? undefined : checkTtl('options.ttlMs', options.ttlMs);
    for (const resource of list) {
      const holder = this.#store.holder(resource);
      if (holder !== undefined && holder !== this.#elsewhere.get(resource)) {
        throw new InvalidArgumentError('resource', resource, 'held by a lock of this application: call loseLock() first');
      }
    }
    const token = `elsewhere:${newToken()}`;
    this.#store.set(list, token, ttlMs);
    for (const resource of list) this.#elsewhere.set(resource, token);
  }

  /** The other owner releases: waiters are woken. False when no other owner held any of them. */
  releaseElsewhere(resources: string | readonly string[]): boolean {
    const list = checkResources(resources, this.options.maxResources);
    let freed = 0;
    for (const resource of list) {
      const token = this.#elsewhere.get(resource);
      if (token === undefined) continue;
      this.#elsewhere.delete(resource);
      freed += this.#store.free([resource], token);
    }
    return freed > 0;
  }

  /**
   * Too few masters answer from now on: acquisitions fail with `QuorumUnreachableError` (503 over
   * HTTP) after the real engine's couple of retries, extensions fail (a held lock then lasts until
   * its validity runs out, and its signal fires), and releases do not reach the masters (the keys
   * stay until they expire). `checkMasters()` reports it, so a health check goes down.
   */
  makeQuorumUnreachable(): void {
    this.#store.reachable = false;
  }

  restoreQuorum(): void {
    this.#store.reachable = true;
  }

  /**
   * The lock this app holds on `resource` is lost, as when its key expired or was deleted on the
   * masters: its signal fires with `LockLostError` (so `using` routines see the abort, auto-
   * extension stops and `assertValid()` throws), and the resource is free for others. Throws when
   * no lock of this app holds `resource`.
   */
  loseLock(resource: string, reason = 'a majority of masters no longer holds this lock (InMemoryRedlock.loseLock)'): void {
    const [name] = checkResources(resource, 1);
    const lock = [...this.#held].find((held) => held.resources.includes(name!) && this.#store.holds(name!, held.token));
    if (!lock) throw new InvalidArgumentError('resource', resource, 'no lock of this application holds it');
    // A reader or permit is one holder among others: only it goes.
    if (lock.kind.type === 'write') this.#store.drop([name!]);
    else this.#store.freeShared([name!], lock.token);
    lock.markLost(new LockLostError(lock.resources, reason));
  }

  /** Whether anyone (a lock of this app, or another owner) holds `resource` now. */
  isHeld(resource: string): boolean {
    return this.#store.holder(resource) !== undefined;
  }

  /**
   * How many callers of this app wait for `resource` now: refused at least once and still trying,
   * or in line behind another caller for the same resources. For a test to know that a request
   * is waiting before it releases what that request waits for.
   */
  waitingFor(resource: string): number {
    return this.#waiting.get(resource) ?? 0;
  }

  // ---- LockEngine: what Lock calls -----------------------------------------------------------

  /** @internal Use `lock.extend()`. */
  async extendLock(lock: Lock, ttlMs: number): Promise<void> {
    const start = startExtension(lock, ttlMs, this.options);
    await Promise.resolve();
    // The request may have reached the stand-in master: the narrowed deadline stands.
    if (!this.#store.reachable) throw new QuorumUnreachableError(lock.resources, this.quorum, [unreachable()]);
    const extended =
      lock.kind.type === 'write' ? this.#store.extend(lock.resources, lock.token, ttlMs) : this.#store.extendShared(lock.resources, lock.token, ttlMs);
    if (extended) {
      const end = monotonicNow();
      lock.renewed(end + validityLeftMs(ttlMs, start, end, this.options.driftFactor), ttlMs);
      return;
    }
    const lost = new LockLostError(lock.resources, 'a majority of masters no longer holds this lock', [{ node: IN_MEMORY_MASTER, status: 'refused' }]);
    lock.markLost(lost);
    throw lost;
  }

  /** @internal Use `lock.release()`. */
  async releaseLock(lock: Lock): Promise<ReleaseResult> {
    this.#held.delete(lock);
    await Promise.resolve();
    // Out of reach, the keys stay on the masters until they expire.
    if (!this.#store.reachable) return { releasedOn: 0, heldUntilRelease: false, nodes: [unreachable()] };
    const freed = lock.kind.type === 'write' ? this.#store.free(lock.resources, lock.token) : this.#store.freeShared(lock.resources, lock.token);
    const outcome: NodeOutcome = { node: IN_MEMORY_MASTER, status: freed > 0 ? 'granted' : 'refused' };
    return { releasedOn: freed > 0 ? 1 : 0, heldUntilRelease: freed > 0, nodes: [outcome] };
  }

  // ---- the acquire loop, as the real engine's ------------------------------------------------

  /** `list`, `ttlMs` and `options` as checkCall passed them. */
  async #acquire(list: string[], ttlMs: number, options: AcquireOptions, queues: boolean): Promise<Lock> {
    const wait = resolveWait(options, this.options);
    const kind = kindOf(options);
    const fencing = options.fencing ?? this.options.fencing;
    const giveUpAt = monotonicNow() + wait.waitTimeoutMs;
    const line = list.join('\n');
    const waits = queues && wait.retryCount > 0;
    // From its start, a call that may wait gives up when releaseAll runs: in line, asleep, or about to try.
    const giveUp = waits ? new AbortController() : undefined;
    if (giveUp) this.#waitingCalls.add(giveUp);
    const signal = giveUp ? (options.signal ? AbortSignal.any([options.signal, giveUp.signal]) : giveUp.signal) : options.signal;
    const caller: QueueTicket = { ticket: ++this.#tickets };
    let waiting = false;
    const startWaiting = () => {
      if (!waiting) this.#countWaiting(list, +1);
      waiting = true;
    };
    // Callers of this process for the same resources line up; only the head tries. Readers and
    // permits hold together, so they do not line up (as in the real engine).
    const exclusive = kind.type === 'write';
    const first = exclusive ? this.#localQueue.enter(line) : true;
    // As the real engine's first try then, a plain SET NX: it sees a semaphore's marker only as a held key.
    const plainFirstTry = first && exclusive && list.length === 1 && !fencing;
    let predecessorFoundNoQuorum = false;
    if (!first) {
      startWaiting();
      try {
        predecessorFoundNoQuorum = await this.#joinLocalLine(line, list, signal, waits ? wait.waitTimeoutMs : 0);
      } catch (error) {
        this.#countWaiting(list, -1);
        if (giveUp) this.#waitingCalls.delete(giveUp);
        throw error;
      }
    }
    let attempt = 0;
    let unreachableRounds = predecessorFoundNoQuorum ? UNREACHABLE_RETRIES : 0;
    let foundNoQuorum = false;
    try {
      for (;;) {
        attempt++;
        await Promise.resolve();
        // Checked right before the round, which is synchronous: nothing can give up the call during it.
        if (signal?.aborted) throw new AcquireAbortedError(list, signal.reason);
        const result = this.#attempt(list, ttlMs, attempt, fencing, caller, waits, kind, plainFirstTry && attempt === 1);
        if ('lock' in result) return result.lock;
        const left = giveUpAt - monotonicNow();
        if (!result.retryable) unreachableRounds++;
        const retryable = result.retryable || unreachableRounds <= UNREACHABLE_RETRIES;
        if (!retryable || attempt > wait.retryCount || left <= 0) {
          foundNoQuorum = !retryable;
          throw result.error;
        }
        // As the real engine's: a plain try found the key held; the scripted round that queues the caller goes at once.
        if (plainFirstTry && attempt === 1 && result.error instanceof LockHeldError) continue;
        startWaiting();
        try {
          await this.#store.sleep(list, Math.min(left, this.#pause(result.error, wait)), signal);
        } catch {
          throw new AcquireAbortedError(list, signal?.reason);
        }
      }
    } finally {
      if (giveUp) this.#waitingCalls.delete(giveUp);
      if (waiting) this.#countWaiting(list, -1);
      this.#store.leaveQueues(list, caller);
      if (exclusive) this.#localQueue.leave(line, foundNoQuorum);
    }
  }

  #pruneHeld(): void {
    for (const lock of this.#held) if (lock.remainingMs() <= 0) this.#held.delete(lock);
    this.#pruneHeldAt = Math.max(64, this.#held.size * 2);
  }

  #countWaiting(resources: readonly string[], change: 1 | -1): void {
    for (const resource of resources) {
      const count = (this.#waiting.get(resource) ?? 0) + change;
      if (count > 0) this.#waiting.set(resource, count);
      else this.#waiting.delete(resource);
    }
  }

  /** One round against the stand-in master: the lock, or why not, decided as a real round is. */
  #attempt(
    resources: string[],
    ttlMs: number,
    attempt: number,
    fencing: boolean,
    caller: QueueTicket,
    waits: boolean,
    kind: LockKind,
    plain: boolean,
  ): { lock: Lock } | RoundFailure {
    const start = monotonicNow();
    const token = newToken();
    let outcome: NodeOutcome;
    let fence: number | undefined;
    let slots: readonly number[] | undefined;
    if (!this.#store.reachable) {
      outcome = unreachable();
    } else {
      const taken =
        kind.type === 'write' ? this.#store.take(resources, token, ttlMs, caller, waits, plain) : this.#store.takeShared(resources, token, ttlMs, caller, waits, kind);
      if (!taken.granted && 'mismatch' in taken) throw new LockKindMismatchError(taken.mismatch.resource, describeKind(kind), taken.mismatch.found);
      if (taken.granted) {
        slots = taken.slots;
        fence = fencing ? this.#store.fence(resources, this.options.fenceTimeFloor) : undefined;
        outcome = { node: IN_MEMORY_MASTER, status: 'granted' };
      } else {
        outcome = { node: IN_MEMORY_MASTER, status: 'refused', value: taken.retryAfterMs ?? -1 };
      }
    }
    const end = monotonicNow();
    const left = validityLeftMs(ttlMs, start, end, this.options.driftFactor);
    if (outcome.status === 'granted' && left > 0) {
      const keys = resources.map((resource) => this.options.keyPrefix + resource);
      const lock = new Lock(this, resources, keys, token, ttlMs, end + left, fence, kind, slots);
      // Locks lost and never released would pile up: forget them, at amortised O(1) per acquire.
      if (this.#held.size >= this.#pruneHeldAt) this.#pruneHeld();
      this.#held.add(lock);
      return { lock };
    }
    if (outcome.status === 'granted') {
      if (kind.type === 'write') this.#store.free(resources, token);
      else this.#store.freeShared(resources, token);
    }
    const granted = outcome.status === 'granted' ? 1 : 0;
    const round = { outcomes: [outcome], granted, refused: outcome.status === 'refused' ? 1 : 0, requests: [] };
    return roundFailure(resources, round, this.quorum, left, attempt);
  }

  /** How long a refused caller sleeps unless a release wakes it: until the blocking key expires, else a retry delay. */
  #pause(error: RedlockError, wait: { retryDelayMs: number; retryJitterMs: number }): number {
    const jitter = Math.random() * wait.retryJitterMs;
    if (error instanceof LockHeldError && error.retryAfterMs !== undefined) return error.retryAfterMs + jitter;
    return wait.retryDelayMs + jitter;
  }

  async #joinLocalLine(line: string, resources: string[], signal: AbortSignal | undefined, budgetMs: number): Promise<boolean> {
    try {
      return await this.#localQueue.join(line, signal, Math.max(1, budgetMs));
    } catch {
      if (signal?.aborted) throw new AcquireAbortedError(resources, signal.reason);
      throw new LockHeldError(resources, [], 0, undefined);
    }
  }
}

function unreachable(): NodeOutcome {
  return { node: IN_MEMORY_MASTER, status: 'error', error: UNREACHABLE };
}
