import { inspect } from 'node:util';
import type { Lock as EngineLock } from '../core/index.js';
import type { ExecutionResult, ExecutionStats } from './types.js';

/** What a compatible Lock shows of itself when logged or serialised. */
export interface LockSummary {
  /** The resources it holds. */
  resources: string[];
  /** Wall-clock time (ms) until which it can be relied on; 0 once released or extended. */
  expiration: number;
}

/** What a compatible Lock needs of its Redlock: node-redlock's `release` and `extend`. */
export interface LockOwner {
  /** Releases `lock` on every master that still holds it. */
  release(lock: Lock): Promise<ExecutionResult>;
  /** Extends `lock` to `duration` ms from now: the Lock returned replaces it. */
  extend(lock: Lock, duration: number): Promise<Lock>;
}

/**
 * A held lock, as node-redlock's `Lock`: `value` is the token stored in the resources' keys,
 * `expiration` the wall-clock time (ms) until which it can be relied on, 0 once released or
 * replaced by an extension. `lock` is the engine's lock underneath (its `remainingMs()`,
 * `signal` and `assertValid()` are measured on a monotonic clock, not the wall clock).
 */
export class Lock {
  constructor(
    /** The Redlock that acquired it. */
    public readonly redlock: LockOwner,
    /** The resources it holds, all together. */
    public readonly resources: string[],
    /** The token in the resources' keys: whoever has it can release the lock. */
    public readonly value: string,
    /** Per round of the acquisition or extension that made it, oldest first, what the masters voted. */
    public readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
    /** Wall-clock time (ms) until which the lock can be relied on; 0 once released or extended. */
    public expiration: number,
    /** The engine's lock underneath. */
    public readonly lock: EngineLock,
  ) {}

  /** Releases the lock on every master (`redlock.release(this)`). */
  async release(): Promise<ExecutionResult> {
    return this.redlock.release(this);
  }

  /** Extends the lock by `duration` ms from now (`redlock.extend(this, duration)`): a new Lock replaces this one. */
  async extend(duration: number): Promise<Lock> {
    return this.redlock.extend(this, duration);
  }

  /** What `JSON.stringify(lock)` shows: never the token, nor the Redlock and its clients' credentials. */
  toJSON(): LockSummary {
    return { resources: this.resources, expiration: this.expiration };
  }

  /** What `console.log(lock)` shows: the same. */
  [inspect.custom](_depth: number, options: object): string {
    return `Lock ${inspect(this.toJSON(), options)}`;
  }
}
