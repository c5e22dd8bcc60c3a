import { checkCount, checkDelay, checkFlag, checkResources, checkTtl } from '../base/argument-checks.js';
import { InvalidArgumentError } from '../base/errors.js';
import type { LockMode } from './lock-kind.js';
import type { Lock } from './lock.js';
import type { WaitOptions } from './redlock-options.js';

// What a call of acquire, tryAcquire, using or enter is given, and its checks. Here, below the
// engine and its acquire path, so both can name these types without importing each other.

/** Options of one `acquire` or `tryAcquire` call: how it waits, and what kind of lock it takes. */
export interface AcquireOptions extends WaitOptions {
  /** Cancels waiting; the acquire then rejects with AcquireAbortedError and holds nothing. */
  signal?: AbortSignal;
  /** Give this lock a fencing token (`lock.fence`); overrides the engine's `fencing` option. */
  fencing?: boolean;
  /** `'read'`: shared with other readers, exclusive of writers. Default `'write'`: the exclusive lock. */
  mode?: LockMode;
  /** At most this many holders at once (a semaphore; each holds a permit). Default 1: the exclusive lock. */
  limit?: number;
  /**
   * With `limit`: how many of the semaphore's permits this hold takes, all or none (a weighted
   * permit, from 1 to `limit`). Callers wait in one first-come line whatever they ask for, so a
   * large request is not starved by small ones. Default 1.
   */
  permits?: number;
}

/** Options of `tryAcquire`: one round, so nothing of waiting; the kind of lock, and fencing. */
export type TryAcquireOptions = Pick<AcquireOptions, 'fencing' | 'mode' | 'limit' | 'permits'>;

/** Options of `using` and `enter` (and of `@WithLock` calls): those of `acquire`, and auto-extension. */
export interface UsingOptions extends AcquireOptions {
  /** Extend the lock while the routine runs. Default true. */
  autoExtend?: boolean;
}

/**
 * The work `using` runs under the lock. `signal` aborts when the lock is lost (its reason a
 * `LockLostError`): pass it to what you call, or check it before each step that relies on the lock.
 */
export type LockedRoutine<T> = (signal: AbortSignal, lock: Lock) => Promise<T>;

/**
 * The arguments of acquire, tryAcquire, using and enter, checked once where the call enters the
 * engine: the acquire path and the session below it take the list returned as checked.
 * Returns the resources as a list without duplicates.
 */
export function checkCall(resources: unknown, ttlMs: unknown, options: UsingOptions | null, limits: { readonly maxResources: number; readonly maxTtlMs: number }): string[] {
  const list = checkResources(resources, limits.maxResources);
  checkTtl('ttlMs', ttlMs, limits.maxTtlMs);
  checkCallOptions(options);
  return list;
}

/**
 * Per-call options, before anything is taken: an object, and every option given (anything but
 * undefined) of its type, so `fencing: 'false'` is refused rather than read as true. `mode`,
 * `limit` and `permits` are checked where the kind is read (kindOf). Runs on every call: it reads each key once
 * and checks only those present.
 */
function checkCallOptions(options: UsingOptions | null): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('options', options, 'expected an object of acquire options');
  }
  const { signal, fencing, autoExtend, retryCount, waitTimeoutMs, retryDelayMs, retryJitterMs } = options;
  // A look-alike signal would fail in a timer later.
  if (signal !== undefined) checkSignal(signal);
  if (fencing !== undefined) checkFlag('fencing', fencing);
  if (autoExtend !== undefined) checkFlag('autoExtend', autoExtend);
  // Here, not when the wait is resolved: a reentrant call resolves none, and resolveWait takes a call's as checked.
  if (retryCount !== undefined) checkCount('retryCount', retryCount);
  if (waitTimeoutMs !== undefined) checkDelay('waitTimeoutMs', waitTimeoutMs);
  if (retryDelayMs !== undefined) checkDelay('retryDelayMs', retryDelayMs);
  if (retryJitterMs !== undefined) checkDelay('retryJitterMs', retryJitterMs);
}

/**
 * tryAcquire's options as acquire takes them: one round, no waiting. Only for options that
 * passed checkCall: spreading something that is not an object (a string, null) would quietly
 * make options of it.
 */
export function oneRound<T extends object>(options: T): T & { readonly retryCount: 0 } {
  return { ...options, retryCount: 0 };
}

/** An AbortSignal, or anything that behaves as one (a signal of another realm or a polyfill). */
function checkSignal(signal: unknown): AbortSignal {
  const candidate = signal as Partial<AbortSignal> | null;
  const usable =
    candidate !== null &&
    typeof candidate === 'object' &&
    typeof candidate.aborted === 'boolean' &&
    typeof candidate.addEventListener === 'function' &&
    typeof candidate.removeEventListener === 'function';
  if (!usable) throw new InvalidArgumentError('signal', signal, 'expected an AbortSignal');
  return signal as AbortSignal;
}
