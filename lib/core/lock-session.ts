import { AsyncLocalStorage } from 'node:async_hooks';
import type { Lock, ReleaseResult } from './lock.js';

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
