import { AsyncLocalStorage } from 'node:async_hooks';
import { autoExtend } from './auto-extender.js';
import { InvalidArgumentError, LockKindMismatchError, LockUpgradeError } from './errors.js';
import { describeKind, familyOf, kindOf, type LockKind } from './lock-kind.js';
import type { Lock, ReleaseResult } from './lock.js';
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
 */
export class LockSession {
  readonly #scope: LockScope;
  readonly #stopExtending: (() => void) | undefined;
  #exit: Promise<ReleaseResult | undefined> | undefined;

  constructor(
    engine: object,
    /** The lock this session acquired, or for a reentrant session the outer lock it runs under. */
    readonly lock: Lock,
    readonly signal: AbortSignal,
    /** True when the context already held every resource: nothing was acquired, nothing is released. */
    readonly reentrant: boolean,
    stopExtending: (() => void) | undefined,
  ) {
    this.#stopExtending = stopExtending;
    const outer = currentScope(engine);
    if (reentrant && outer) {
      this.#scope = outer;
    } else {
      const locks = new Map(outer?.locks);
      for (const resource of lock.resources) locks.set(resource, lock);
      this.#scope = { engine, locks, signal, parent: storage.getStore() };
    }
  }

  /** Runs `fn` (and everything it starts) inside this session's async context. */
  run<T>(fn: () => T): T {
    return storage.run(this.#scope, fn);
  }

  /** Stops extending and releases what this session acquired. Idempotent. */
  exit(): Promise<ReleaseResult | undefined> {
    this.#exit ??= this.reentrant
      ? Promise.resolve(undefined)
      : (this.#stopExtending?.(), this.lock.release());
    return this.#exit;
  }
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
  if (outer) checkReentry(outer, list, kind);
  const missing = outer ? list.filter((resource) => !outer.locks.has(resource)) : list;
  if (outer && missing.length === 0) {
    return new LockSession(engine, outer.locks.get(list[0]!)!, outer.signal, true, undefined);
  }
  const lock = await engine.acquire(missing, ttlMs, options);
  const stop = options.autoExtend === false ? undefined : autoExtend(lock, ttlMs);
  const signal = outer ? AbortSignal.any([outer.signal, lock.signal]) : lock.signal;
  return new LockSession(engine, lock, signal, false, stop);
}

/**
 * Whether the holds this context has on some of `resources` cover a request of `kind`: a read
 * inside a write or a read, a write inside a write, a permit inside a permit of the same limit.
 * A write inside a read would wait for itself for ever (the outer reader never leaves): refused.
 */
function checkReentry(outer: LockScope, resources: readonly string[], kind: LockKind): void {
  const upgrades: string[] = [];
  for (const resource of resources) {
    const held = outer.locks.get(resource)?.kind;
    if (!held) continue;
    if (familyOf(held) !== familyOf(kind)) throw new LockKindMismatchError(resource, describeKind(kind), describeKind(held));
    if (kind.type === 'write' && held.type === 'read') upgrades.push(resource);
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
