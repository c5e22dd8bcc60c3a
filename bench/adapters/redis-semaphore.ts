import type { Redis } from 'ioredis';
import { RedlockMultiSemaphore, RedlockMutex, RedlockSemaphore } from 'redis-semaphore';
import { connect, disconnect } from '../support/clients.js';
import { WAIT_MS, type LockAdapter, type SetupOptions, type SharedShape } from './lock-adapter.js';

export class RedisSemaphoreAdapter implements LockAdapter<RedlockMutex> {
  /** One name for every scenario: which of its classes a scenario uses is in `settings`. */
  readonly name = 'redis-semaphore';
  readonly packageName = 'redis-semaphore';
  readonly settings =
    'RedlockMutex for a lock, RedlockSemaphore for a permit, RedlockMultiSemaphore for weighted permits; ' +
    `acquireTimeout ${WAIT_MS}; default retryInterval 10 ms (no jitter); ` +
    'refreshInterval 0 (no auto-refresh, like the other libraries\' plain acquire)';
  #clients: Redis[] = [];

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
  }

  /** A mutex object per acquisition is the library's API: it carries the owner identifier. */
  async acquire(key: string, ttlMs: number): Promise<RedlockMutex> {
    const mutex = new RedlockMutex(this.#clients, key, {
      lockTimeout: ttlMs,
      acquireTimeout: WAIT_MS,
      refreshInterval: 0,
    });
    await mutex.acquire();
    return mutex;
  }

  /**
   * RedlockSemaphore for a permit (its RedlockMutex's sibling), RedlockMultiSemaphore for weighted
   * permits (every acquire of the weighted scenario, weight 1 too: the two keep their holders
   * apart); it has no read-write lock.
   */
  async acquireShared(key: string, ttlMs: number, shape: SharedShape): Promise<RedlockMutex> {
    if (!('limit' in shape)) throw new Error('redis-semaphore has no read-write lock');
    const options = { lockTimeout: ttlMs, acquireTimeout: WAIT_MS, refreshInterval: 0 };
    const semaphore =
      shape.permits === undefined
        ? new RedlockSemaphore(this.#clients, key, shape.limit, options)
        : new RedlockMultiSemaphore(this.#clients, key, shape.limit, shape.permits, options);
    await semaphore.acquire();
    return semaphore;
  }

  release(mutex: RedlockMutex): Promise<void> {
    return mutex.release();
  }

  async close(): Promise<void> {
    disconnect(this.#clients);
  }
}
