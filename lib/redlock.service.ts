import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Lock } from './core/lock/lock.js';
import { currentScope, type LockSession } from './core/acquire/lock-session.js';
import { Redlock, type AcquireOptions, type TryAcquireOptions, type LockedRoutine, type UsingOptions } from './core/redlock.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import type { LockInspection } from './core/inspection/lock-inspection.js';
import { RedisConnections } from './redis-connections.js';
import { REDLOCK_SETTINGS } from './redlock.constants.js';

/**
 * Locks for code that takes them itself. Every ttl is optional (default: the module's
 * `defaultTtlMs`). Work run by `using` (or under `@WithLock`) runs in the lock's async
 * context: it can read `currentLock()` and `currentSignal()`, and a nested request for a
 * resource it already holds is reentrant: it neither waits for itself nor releases early.
 */
@Injectable()
export class RedlockService implements OnApplicationShutdown {
  /** @internal Nest constructs it: inject `RedlockService` where locks are needed. */
  constructor(
    // Injected by the Redlock class; RedlockTestingModule provides its in-memory engine under it.
    @Inject(Redlock) private readonly engine: RedlockEngine,
    // Typed by what the service uses of them: the module's connection holder and settings are
    // internal, and the published constructor must not name them.
    @Inject(RedisConnections) private readonly connections: { close(): Promise<void> },
    @Inject(REDLOCK_SETTINGS) private readonly settings: { readonly defaultTtlMs: number },
  ) {}

  /**
   * The underlying engine, for everything this service does not wrap. Under
   * `RedlockTestingModule` it is the `InMemoryRedlock`, which answers the calls of
   * `RedlockEngine` and has no masters (`nodes` is empty).
   */
  get redlock(): Redlock {
    return this.engine as Redlock;
  }

  /** Acquires the lock, waiting per the options while another owner holds it. Release it yourself. */
  acquire(resources: string | readonly string[], ttlMs: number = this.settings.defaultTtlMs, options?: AcquireOptions): Promise<Lock> {
    return this.engine.acquire(resources, ttlMs, options);
  }

  /**
   * One round, no waiting: the lock, or null when another owner holds it. `mode` and `limit` as
   * for `acquire` (a reader; a permit of a semaphore).
   */
  tryAcquire(
    resources: string | readonly string[],
    ttlMs: number = this.settings.defaultTtlMs,
    options?: TryAcquireOptions,
  ): Promise<Lock | null> {
    return this.engine.tryAcquire(resources, ttlMs, options);
  }

  /**
   * Runs `routine` holding the lock, extending it while it runs (the signal aborts if it is
   * lost) and releasing it afterwards, whatever happens.
   */
  using<T>(resources: string | readonly string[], routine: LockedRoutine<T>, options?: UsingOptions): Promise<T>;
  /** The same, with a ttl of its own instead of the module's `defaultTtlMs`. */
  using<T>(resources: string | readonly string[], ttlMs: number, routine: LockedRoutine<T>, options?: UsingOptions): Promise<T>;
  using<T>(
    resources: string | readonly string[],
    ttlOrRoutine: number | LockedRoutine<T>,
    routineOrOptions?: LockedRoutine<T> | UsingOptions,
    options?: UsingOptions,
  ): Promise<T> {
    if (typeof ttlOrRoutine === 'function') {
      return this.engine.using(resources, this.settings.defaultTtlMs, ttlOrRoutine, routineOrOptions as UsingOptions);
    }
    return this.engine.using(resources, ttlOrRoutine, routineOrOptions as LockedRoutine<T>, options);
  }

  /**
   * Acquires (or re-enters) for work that is not one promise; run it with `session.run()` and
   * always call `session.exit()` when it ends.
   */
  enter(resources: string | readonly string[], ttlMs: number = this.settings.defaultTtlMs, options?: UsingOptions): Promise<LockSession> {
    return this.engine.enter(resources, ttlMs, options);
  }

  /**
   * The lock the current async context holds on `resource`, or without a resource the innermost
   * lock it holds; undefined outside locked work.
   */
  currentLock(resource?: string): Lock | undefined {
    const scope = currentScope(this.engine);
    if (!scope) return undefined;
    if (resource !== undefined) return scope.locks.get(resource);
    return [...scope.locks.values()].at(-1);
  }

  /** Fires when any lock the current context holds is lost; undefined outside locked work. */
  currentSignal(): AbortSignal | undefined {
    return currentScope(this.engine)?.signal;
  }

  /**
   * Takes up a lock another replica (or a scheduler) handed over with `lock.handOver()`, to
   * extend and release it here (`Redlock.adopt`). The handle carries the lock's token: never log it.
   */
  adopt(handle: string, ttlMs?: number): Promise<Lock> {
    return this.engine.adopt(handle, ttlMs);
  }

  /**
   * What each resource looks like on the masters now, without taking it: held, free or unknown
   * as a majority says, and by what, until when, its fence and its waiters (`Redlock.inspect`).
   * A snapshot for operators and dashboards, never a reason to skip taking the lock.
   */
  inspect(resources: string | readonly string[]): Promise<LockInspection[]> {
    return this.engine.inspect(resources);
  }

  /**
   * Stops auto-extension and releases every lock still held (firing their signals, so running
   * work stops relying on them), then closes the engine's own connections (release wake-ups)
   * and those the module opened, in that order: a release needs the connections.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.engine.releaseAll('application shutdown');
    this.engine.close();
    await this.connections.close();
  }
}
