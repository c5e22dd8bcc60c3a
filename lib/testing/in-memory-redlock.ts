import { EventEmitter } from 'node:events';
import { InvalidArgumentError, LockLostError } from '../core/base/errors.js';
import { EngineCore } from '../core/acquire/engine-core.js';
import { HeldLocks } from '../core/acquire/held-locks.js';
import type { LockSession } from '../core/acquire/lock-session.js';
import type { Kinds } from '../core/kinds/kinds.js';
import { InstrumentationGuard } from '../core/lock/instrumentation-guard.js';
import type { Lock, LockEngine, ReleaseResult } from '../core/lock/lock.js';
import type { MastersHealth } from '../core/voters/master-health.js';
import type { AcquireOptions, LockedRoutine, TryAcquireOptions, UsingOptions } from '../core/lock/acquire-options.js';
import type { RedlockEngine } from '../core/redlock-engine.js';
import { resolveOptions, type RedlockOptions, type ResolvedRedlockOptions } from '../core/lock/redlock-options.js';
import { checkProbeTimeout, checkResources, checkTtl } from '../core/base/argument-checks.js';
import { KeyNames } from '../core/rounds/key-names.js';
import { LocalQueue } from '../core/waiting/local-queue.js';
import type { Waiter } from '../core/waiting/waiter.js';
import { newToken } from '../core/base/token.js';
import { IN_MEMORY_MASTER, MemoryLockStore, UNREACHABLE } from './memory-lock-store.js';
import { memoryKinds } from './memory-kinds/memory-kinds.js';
import type { MemoryHoldKind } from './memory-kinds/memory-kind.js';
import { WaitingCount } from './waiting-count.js';
import { MemoryLeaderRecords } from './memory-leader-records.js';
import { inspectionOf, summarise, tagOf, type LockInspection } from '../core/inspection/lock-inspection.js';
import { Election, type ElectionOptions } from '../core/election/election.js';

export { IN_MEMORY_MASTER };

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
 *
 * Only the masters are modelled (MemoryLockStore, and the lock kinds over it in memory-kinds/):
 * the acquire loop, sessions, held locks, extensions and releases are the real engine's (EngineCore).
 */
export class InMemoryRedlock extends EventEmitter implements RedlockEngine, LockEngine {
  /** @internal The options with their defaults filled in, as `Redlock.options`. */
  readonly options: ResolvedRedlockOptions;
  /** Masters a lock needs: 1, the modelled masters answer as one. */
  readonly quorum = 1;
  /** @internal No real masters, as `Redlock.nodes` would list them. */
  readonly nodes: readonly never[] = [];
  readonly #store = new MemoryLockStore();
  readonly #names: KeyNames;
  readonly #kinds: Kinds<MemoryHoldKind>;
  readonly #waiting = new WaitingCount();
  /** Per resource, the token another owner holds it with (holdElsewhere). */
  readonly #elsewhere = new Map<string, string>();
  readonly #core: EngineCore;
  readonly #leaderRecords = new MemoryLeaderRecords();
  readonly #instrumentation: InstrumentationGuard;

  constructor(options: RedlockOptions = {}) {
    super();
    this.options = resolveOptions(options);
    const hooks = this.#waiting.hooks(this.options.instrumentation, (hook, error) => instrumentation.failed(hook, error));
    const instrumentation: InstrumentationGuard = new InstrumentationGuard(hooks, this.options.logger);
    this.#instrumentation = instrumentation;
    const held = new HeldLocks(instrumentation);
    const localQueue = new LocalQueue();
    const store = this.#store;
    this.#names = new KeyNames(this.options, false);
    this.#kinds = memoryKinds({
      engine: this,
      store,
      options: this.options,
      localQueue,
      held: (lock, round, waiter, queuing, since) => held.add(lock, round, waiter, queuing, since),
    });
    const leave = (resources: readonly string[], waiter: Waiter) => store.leave(this.#keys(resources), waiter.id);
    this.#core = new EngineCore(this, {
      quorum: this.quorum,
      options: this.options,
      names: this.#names,
      localQueue,
      entries: { leave, leaveNow: async (resources, waiter) => leave(resources, waiter) },
      kinds: this.#kinds,
      // Releases wake the waiters at once, as the masters' messages do.
      wakeups: store,
      quarantine: undefined,
      instrumentation,
      held,
    });
  }

  /** As `Redlock.acquire`: waits while another owner holds the resources, within `waitTimeoutMs`. */
  acquire(resources: string | readonly string[], ttlMs: number, options: AcquireOptions = {}): Promise<Lock> {
    return this.#core.acquire(resources, ttlMs, options);
  }

  /** As `Redlock.tryAcquire`: one round, `null` when another owner holds them. */
  tryAcquire(resources: string | readonly string[], ttlMs: number, options: TryAcquireOptions = {}): Promise<Lock | null> {
    return this.#core.tryAcquire(resources, ttlMs, options);
  }

  /** As `Redlock.claim`: one round; won, the lock is left to expire, never released. */
  claim(resources: string | readonly string[], ttlMs: number): Promise<boolean> {
    return this.#core.claim(resources, ttlMs);
  }

  /** As `Redlock.adopt`: takes up a lock handed over by `lock.handOver()` on this engine. */
  adopt(handle: string, ttlMs?: number): Promise<Lock> {
    return this.#core.adopt(handle, ttlMs);
  }

  /** As `Redlock.inspect`: what the modelled masters hold for each resource; writes nothing. */
  async inspect(resources: string | readonly string[]): Promise<LockInspection[]> {
    const list = checkResources(resources, this.options.maxResources);
    return list.map((resource) => {
      const key = this.#names.lock(resource);
      if (!this.#store.reachable) return summarise(resource, [{ node: IN_MEMORY_MASTER, state: 'unknown', error: UNREACHABLE }], this.quorum);
      const facts = this.#store.inspect(key);
      const master = inspectionOf(IN_MEMORY_MASTER, {
        ...tagOf(facts.value),
        pttl: facts.ttlMs,
        holders: facts.holders,
        used: facts.used,
        latest: facts.latestMs,
        waiting: facts.waiting,
        fence: facts.fence,
      });
      return summarise(resource, [master], this.quorum);
    });
  }

  /** As `Redlock.election`: a leader election among this engine's callers. */
  election(name: string, options: ElectionOptions = {}): Election {
    return new Election(this, this.#leaderRecords, this.#instrumentation, name, options);
  }


  /** As `Redlock.using`: acquires, extends while `routine` runs, always releases. */
  using<T>(resources: string | readonly string[], ttlMs: number, routine: LockedRoutine<T>, options: UsingOptions = {}): Promise<T> {
    return this.#core.using(resources, ttlMs, routine, options);
  }

  /** As `Redlock.enter`: acquires (or re-enters) for work that is not one promise. */
  enter(resources: string | readonly string[], ttlMs: number, options: UsingOptions = {}): Promise<LockSession> {
    return this.#core.enter(resources, ttlMs, options);
  }

  /** As `Redlock.expectTtl`: a ttl the app will use (the restart quarantine's window covers it). */
  expectTtl(ttlMs: number): void {
    checkTtl('ttlMs', ttlMs, this.options.maxTtlMs);
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

  /** The locks this engine's callers hold now. */
  get heldLocks(): ReadonlySet<Lock> {
    return this.#core.heldLocks;
  }

  /** As the real engine's: waiting calls give up first (AcquireAbortedError), so none is handed a lock released here. */
  releaseAll(reason = 'released at shutdown'): Promise<void> {
    return this.#core.releaseAll(reason);
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
    const ttlMs = options.ttlMs === undefined ? undefined : checkTtl('options.ttlMs', options.ttlMs, this.options.maxTtlMs);
    for (const resource of list) {
      const holder = this.#store.get(this.#names.lock(resource));
      if (holder !== undefined && holder !== this.#elsewhere.get(resource)) {
        throw new InvalidArgumentError('resource', resource, 'held by a lock of this application: call loseLock() first');
      }
    }
    const token = `elsewhere:${newToken()}`;
    for (const resource of list) {
      this.#store.set(this.#names.lock(resource), token, ttlMs);
      this.#elsewhere.set(resource, token);
    }
  }

  /** The other owner releases: waiters are woken. False when no other owner held any of them. */
  releaseElsewhere(resources: string | readonly string[]): boolean {
    const list = checkResources(resources, this.options.maxResources);
    let freed = false;
    for (const resource of list) {
      const token = this.#elsewhere.get(resource);
      if (token === undefined) continue;
      this.#elsewhere.delete(resource);
      if (this.#store.delete(this.#names.lock(resource), token)) freed = true;
    }
    return freed;
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

  /** The masters answer again, as before `makeQuorumUnreachable()`. */
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
    const lock = [...this.#core.heldLocks].find((held) => held.resources.includes(name!));
    if (!lock) throw new InvalidArgumentError('resource', resource, 'no lock of this application holds it');
    // Only this hold goes: a reader or a permit is one holder among others.
    this.#kinds.of(lock.kind).forget(this.#names.lock(name!), lock.token);
    lock.markLost(new LockLostError(lock.resources, reason));
  }

  /** Whether anyone (a lock of this app, or another owner) holds `resource` now. */
  isHeld(resource: string): boolean {
    return this.#store.get(this.#names.lock(resource)) !== undefined;
  }

  /**
   * How many callers of this app wait for `resource` now: refused at least once and still trying,
   * or in line behind another caller for the same resources. For a test to know that a request
   * is waiting before it releases what that request waits for.
   */
  waitingFor(resource: string): number {
    return this.#waiting.of(resource);
  }

  // ---- LockEngine: what Lock calls -----------------------------------------------------------

  /** @internal Use `lock.extend()`. */
  extendLock(lock: Lock, ttlMs: number): Promise<void> {
    return this.#core.extendLock(lock, ttlMs);
  }

  /** @internal Use `lock.release()`. */
  releaseLock(lock: Lock): Promise<ReleaseResult> {
    return this.#core.releaseLock(lock);
  }

  /** @internal Use `lock.handOver()`. */
  handOverLock(lock: Lock): void {
    this.#core.handOverLock(lock);
  }

  /** @internal Reports a lost lock to the instrumentation, as the real engine does. */
  lockLost(lock: Lock, error: unknown): void {
    this.#core.lockLost(lock, error);
  }

  #keys(resources: readonly string[]): string[] {
    return resources.map((resource) => this.#names.lock(resource));
  }
}
