import { AsyncLocalStorage } from 'node:async_hooks';
import { autoExtend } from './auto-extender.js';
import { InvalidArgumentError, LockKindMismatchError, LockUpgradeError } from '../base/errors.js';
import { kindOf, type LockKind } from '../lock/lock-kind.js';
import type { Lock, LockEndListener, ReleaseResult } from '../lock/lock.js';
import { checkCall, type LockedRoutine, type UsingOptions } from '../lock/acquire-options.js';

/** The locks the current async context holds on one engine, and the signal that covers them all. */
export interface LockScope {
  readonly engine: object;
  readonly locks: ReadonlyMap<string, Lock>;
  readonly signal: AbortSignal;
  readonly parent: LockScope | undefined;
}

const storage = new AsyncLocalStorage<LockScope>();

/** The innermost scope of `engine` in the current async context, if any. */
export function currentScope(engine: object): LockScope | undefined {
  for (let scope = storage.getStore(); scope; scope = scope.parent) {
    if (scope.engine === engine) return scope;
  }
  return undefined;
}

class SessionScope implements LockScope {
  /** Where calls that re-enter this scope's holds run, shared by them while those holds stand. */
  #reentry: HoldWatch | undefined;

  constructor(
    readonly engine: object,
    readonly locks: ReadonlyMap<string, Lock>,
    readonly signal: AbortSignal,
    readonly parent: LockScope | undefined,
  ) {}

  /**
   * The watch for work re-entering `live` (this scope's holds still live): one per scope, not
   * one per call, since an AbortController costs more than the rest of a reentrant call.
   */
  reentry(live: ReadonlyMap<string, Lock>): HoldWatch {
    const reentry = this.#reentry;
    // Holds only die: the same count means the same holds, all still live.
    if (reentry && !reentry.ended && reentry.scope.locks.size === live.size) return reentry;
    return (this.#reentry = new HoldWatch(this.engine, live, true));
  }
}

/**
 * Work that runs under holds it did not take itself (a reentrant call, or one nested in
 * another's hold that took resources of its own) and its own signal, which fires when any of
 * those holds is lost, or released while the work still runs: a timer or a fire-and-forget
 * promise started inside `using` keeps its async context after the outer call returned. The
 * outer lock's own `signal` does not fire for its ordinary release (that is no loss).
 *
 * Not AbortSignal.any: on Node 20 each call leaves an entry on its sources that nothing removes,
 * so nested sessions inside one long hold grew the heap without bound. A watch listens on the
 * locks themselves, and stops when its work is over (a nested session's) or when a hold ends
 * (the one a scope keeps for reentrant calls).
 */
class HoldWatch {
  readonly scope: SessionScope;
  readonly #lost = new AbortController();
  readonly #locks: Lock[] = [];
  #running: number;
  /** A hold ended, or the work is over: this watch serves no more work. */
  ended = false;

  constructor(
    engine: object,
    locks: ReadonlyMap<string, Lock>,
    /** Kept by a scope for every reentrant call (each joins it), rather than made for one session (which it serves from the start). */
    readonly shared: boolean,
  ) {
    this.scope = new SessionScope(engine, locks, this.#lost.signal, storage.getStore());
    this.#running = shared ? 0 : 1;
    for (const lock of locks.values()) {
      // A hold of a nested session lost while it was acquiring: its signal has already fired.
      if (this.ended) break;
      if (this.#locks.includes(lock)) continue;
      this.#locks.push(lock);
      lock.onEnd(this.#onEnd);
    }
  }

  join(): this {
    this.#running++;
    return this;
  }

  leave(): void {
    if (--this.#running === 0 && !this.shared) this.#stop();
  }

  readonly #onEnd: LockEndListener = (reason) => {
    this.#stop();
    if (this.#running > 0) this.#lost.abort(reason);
  };

  #stop(): void {
    if (this.ended) return;
    this.ended = true;
    for (const lock of this.#locks) lock.offEnd(this.#onEnd);
  }
}

/**
 * Locked work in progress: the lock, the signal that says it is lost, and the async context in
 * which nested requests for the same resources are reentrant. Shared by `Redlock.using` and
 * the Nest interceptor, which must hold a lock across an Observable rather than a promise.
 */
export class LockSession {
  readonly #scope: LockScope;
  readonly #stopExtending: (() => void) | undefined;
  readonly #watch: { leave(): void } | undefined;
  #exit: Promise<ReleaseResult | undefined> | undefined;

  /** @internal Sessions come from `enter` (or `using`) of an engine. */
  constructor(
    /** The lock this session acquired, or for a reentrant session the outer lock it runs under. */
    readonly lock: Lock,
    /** True when the context already held every resource: nothing was acquired, nothing is released. */
    readonly reentrant: boolean,
    scope: LockScope,
    /** Set when the work runs under holds it did not take: told when the work is over. */
    watch: { leave(): void } | undefined,
    stopExtending: (() => void) | undefined,
  ) {
    this.#scope = scope;
    this.#watch = watch;
    this.#stopExtending = stopExtending;
    this.signal = scope.signal;
  }

  /** Fires when the work must stop relying on its holds: lost, or (for work under another's hold) released. */
  readonly signal: AbortSignal;

  /** Runs `fn` (and everything it starts) inside this session's async context. */
  run<T>(fn: () => T): T {
    return storage.run(this.#scope, fn);
  }

  /** Stops extending and releases what this session acquired. Idempotent. */
  exit(): Promise<ReleaseResult | undefined> {
    if (this.#exit) return this.#exit;
    // First: the release of this session's own lock is the end of the work, not news for it.
    this.#watch?.leave();
    this.#exit = this.reentrant ? Promise.resolve(undefined) : (this.#stopExtending?.(), this.lock.release());
    return this.#exit;
  }

  /** `await using session = await redlock.enter(...)`: exited when the block is left. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.exit();
  }
}

/** Whether a hold can still be relied on: not released, not lost, within its validity. */
function isLive(lock: Lock): boolean {
  return lock.remainingMs() > 0;
}

/** What entering a session asks of an engine: the production engine and the in-memory one alike. */
export interface SessionEngine {
  /** Whose holds a session's scope records: what `currentScope` is asked with. */
  readonly engine: object;
  readonly maxResources: number;
  readonly maxTtlMs: number;
  /** Acquires resources that enterSession has checked (checkCall), without checking them again. */
  acquireChecked(resources: string[], ttlMs: number, options: UsingOptions): Promise<Lock>;
}

/**
 * `enter` of every engine: acquires (or re-enters, when this context already holds every
 * resource) and starts auto-extension. Only the resources not yet held are acquired.
 */
export async function enterSession(sessions: SessionEngine, resources: string | readonly string[], ttlMs: number, options: UsingOptions): Promise<LockSession> {
  const list = checkCall(resources, ttlMs, options, sessions);
  const { engine } = sessions;
  const kind = kindOf(options);
  const outer = currentScope(engine);
  // A hold released, lost or out of validity satisfies nothing: a task started inside `using`
  // keeps its async context after the outer call returned, and must then really acquire.
  const inherited = outer ? liveLocks(outer.locks) : undefined;
  if (inherited) {
    checkReentry(inherited, list, kind);
    const first = inherited.get(list[0]!);
    if (first && list.every((resource) => inherited.has(resource))) {
      const watch = (outer as SessionScope).reentry(inherited).join();
      return new LockSession(first, true, watch.scope, watch, undefined);
    }
  }
  const missing = inherited ? list.filter((resource) => !inherited.has(resource)) : list;
  const lock = await sessions.acquireChecked(missing, ttlMs, options);
  const stop = options.autoExtend === false ? undefined : autoExtend(lock, ttlMs);
  const locks = new Map(inherited);
  for (const resource of lock.resources) locks.set(resource, lock);
  if (!inherited) return new LockSession(lock, false, new SessionScope(engine, locks, lock.signal, storage.getStore()), undefined, stop);
  // The outer holds as they were when the call began: one lost during the wait fires the new signal at once.
  const watch = new HoldWatch(engine, locks, false);
  return new LockSession(lock, false, watch.scope, watch, stop);
}

/** The holds of `locks` that can still be relied on (`locks` itself when all can); undefined when none can. */
function liveLocks(locks: ReadonlyMap<string, Lock>): ReadonlyMap<string, Lock> | undefined {
  let dead = 0;
  for (const lock of locks.values()) if (!isLive(lock)) dead++;
  if (dead === 0) return locks;
  if (dead === locks.size) return undefined;
  const live = new Map<string, Lock>();
  for (const [resource, lock] of locks) if (isLive(lock)) live.set(resource, lock);
  return live;
}

/**
 * Whether the holds this context has on some of `resources` cover a request of `kind`: a read
 * inside a write or a read, a write inside a write, a permit inside a permit of the same limit.
 * A write inside a read would wait for itself for ever (the outer reader never leaves): refused.
 */
function checkReentry(held: ReadonlyMap<string, Lock>, resources: readonly string[], kind: LockKind): void {
  const upgrades: string[] = [];
  const larger: string[] = [];
  let heldPermits = 0;
  for (const resource of resources) {
    const heldKind = held.get(resource)?.kind;
    if (!heldKind) continue;
    if (heldKind.family !== kind.family) throw new LockKindMismatchError(resource, kind.name, heldKind.name);
    if (kind.mode === 'write' && heldKind.mode === 'read') upgrades.push(resource);
    // A weighted permit inside a smaller one would run counted at the outer weight.
    if (kind.permits > heldKind.permits) {
      larger.push(resource);
      heldPermits = heldKind.permits;
    }
  }
  if (upgrades.length > 0) throw new LockUpgradeError(upgrades);
  if (larger.length > 0) throw new LockUpgradeError(larger, { asked: kind.permits, held: heldPermits, limit: kind.limit });
}

/** `using` of every engine: the routine runs in a session, which is always exited afterwards. */
export async function runInSession<T>(
  enter: () => Promise<LockSession>,
  routine: LockedRoutine<T>,
): Promise<T> {
  // Checked before the lock is taken: a routine that cannot run must not cost a lock cycle.
  if (typeof routine !== 'function') throw new InvalidArgumentError('routine', routine, 'expected a function');
  const session = await enter();
  try {
    return await session.run(() => routine(session.signal, session.lock));
  } finally {
    await session.exit();
  }
}
