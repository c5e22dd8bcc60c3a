import { AsyncLocalStorage } from 'node:async_hooks';
import { autoExtend } from './auto-extender.js';
import { InvalidArgumentError, LockKindMismatchError, LockUpgradeError } from './errors.js';
import { describeKind, familyOf, kindOf, type LockKind } from './lock-kind.js';
import type { Lock, LockEndListener, ReleaseResult } from './lock.js';
import type { AcquireOptions, LockedRoutine, UsingOptions } from './redlock.js';
import { checkCallOptions, checkResources, checkTtl } from './redlock-options.js';

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

/**
 * Locked work in progress: the lock, the signal that says it is lost, and the async context in
 * which nested requests for the same resources are reentrant. Shared by `Redlock.using` and
 * the Nest interceptor, which must hold a lock across an Observable rather than a promise.
 *
 * Work that runs under holds it did not take itself (a reentrant session, or one nested in
 * another's hold) can outlive them: a timer or a fire-and-forget promise started inside
 * `using` keeps its async context after the outer call returned. Its signal is its own, and
 * fires when any hold it runs under is lost or released while it runs; it stops listening when
 * it exits, so nesting leaves nothing behind on the outer locks.
 */
export class LockSession {
  readonly #scope: LockScope;
  readonly #stopExtending: (() => void) | undefined;
  /** The holds of others this session runs under (and its own), while it listens for their end. */
  readonly #underlying: readonly Lock[];
  readonly #onEnd: LockEndListener | undefined;
  #exit: Promise<ReleaseResult | undefined> | undefined;

  /** @internal Sessions come from `enter` (or `using`) of an engine. */
  constructor(
    engine: object,
    /** The lock this session acquired, or for a reentrant session the outer lock it runs under. */
    readonly lock: Lock,
    /** The holds the work runs under: this session's lock on its resources, and the outer ones still live. */
    locks: ReadonlyMap<string, Lock>,
    /** True when the context already held every resource: nothing was acquired, nothing is released. */
    readonly reentrant: boolean,
    stopExtending: (() => void) | undefined,
  ) {
    this.#stopExtending = stopExtending;
    const underlying = reentrant || locks.size > lock.resources.length ? distinctLocks(locks) : undefined;
    let signal: AbortSignal;
    if (underlying) {
      // Not AbortSignal.any: on Node 20 each call leaves an entry on its sources that is never
      // removed, so nested sessions inside one long hold would grow it without bound.
      const lost = new AbortController();
      const onEnd: LockEndListener = (reason) => lost.abort(reason);
      this.#underlying = underlying;
      this.#onEnd = onEnd;
      for (const held of underlying) held.onEnd(onEnd);
      signal = lost.signal;
    } else {
      this.#underlying = NONE;
      this.#onEnd = undefined;
      signal = lock.signal;
    }
    this.signal = signal;
    this.#scope = { engine, locks, signal, parent: storage.getStore() };
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
    if (this.#onEnd) for (const held of this.#underlying) held.offEnd(this.#onEnd);
    this.#exit = this.reentrant ? Promise.resolve(undefined) : (this.#stopExtending?.(), this.lock.release());
    return this.#exit;
  }
}

const NONE: readonly Lock[] = [];

function distinctLocks(locks: ReadonlyMap<string, Lock>): Lock[] {
  const distinct: Lock[] = [];
  for (const lock of locks.values()) if (!distinct.includes(lock)) distinct.push(lock);
  return distinct;
}

/** Whether a hold can still be relied on: not released, not lost, within its validity. */
function isLive(lock: Lock): boolean {
  return lock.remainingMs() > 0;
}

/** What entering a session asks of an engine: the production engine and the in-memory one alike. */
export interface SessionEngine {
  readonly options: { readonly maxResources: number };
  acquire(resources: readonly string[], ttlMs: number, options: AcquireOptions): Promise<Lock>;
}

/**
 * `enter` of every engine: acquires (or re-enters, when this context already holds every
 * resource) and starts auto-extension. Only the resources not yet held are acquired.
 */
export async function enterSession(engine: SessionEngine, resources: string | readonly string[], ttlMs: number, options: UsingOptions): Promise<LockSession> {
  const list = checkResources(resources, engine.options.maxResources);
  checkTtl('ttlMs', ttlMs);
  checkCallOptions(options);
  const kind = kindOf(options);
  const outer = currentScope(engine);
  // A hold released, lost or out of validity satisfies nothing: a task started inside `using`
  // keeps its async context after the outer call returned, and must then really acquire.
  const inherited = outer ? liveLocks(outer.locks) : undefined;
  if (inherited) {
    checkReentry(inherited, list, kind);
    const first = inherited.get(list[0]!);
    if (first && list.every((resource) => inherited.has(resource))) return new LockSession(engine, first, inherited, true, undefined);
  }
  const missing = inherited ? list.filter((resource) => !inherited.has(resource)) : list;
  const lock = await engine.acquire(missing, ttlMs, options);
  const stop = options.autoExtend === false ? undefined : autoExtend(lock, ttlMs);
  // The outer holds as they were when the call began: one lost during the wait fires the new signal at once.
  const locks = inherited ?? new Map<string, Lock>();
  for (const resource of lock.resources) locks.set(resource, lock);
  return new LockSession(engine, lock, locks, false, stop);
}

/** The holds of `locks` that can still be relied on; undefined when none can. */
function liveLocks(locks: ReadonlyMap<string, Lock>): Map<string, Lock> | undefined {
  let live: Map<string, Lock> | undefined;
  for (const [resource, lock] of locks) if (isLive(lock)) (live ??= new Map()).set(resource, lock);
  return live;
}

/**
 * Whether the holds this context has on some of `resources` cover a request of `kind`: a read
 * inside a write or a read, a write inside a write, a permit inside a permit of the same limit.
 * A write inside a read would wait for itself for ever (the outer reader never leaves): refused.
 */
function checkReentry(held: ReadonlyMap<string, Lock>, resources: readonly string[], kind: LockKind): void {
  const upgrades: string[] = [];
  for (const resource of resources) {
    const heldKind = held.get(resource)?.kind;
    if (!heldKind) continue;
    if (familyOf(heldKind) !== familyOf(kind)) throw new LockKindMismatchError(resource, describeKind(kind), describeKind(heldKind));
    if (kind.type === 'write' && heldKind.type === 'read') upgrades.push(resource);
  }
  if (upgrades.length > 0) throw new LockUpgradeError(upgrades);
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
