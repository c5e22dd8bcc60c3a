import type { Redis } from 'ioredis';
import { createRedlock, IoredisAdapter, type LockHandle } from 'redlock-universal';
import { connect, disconnect } from '../support/clients.js';
import { WAIT_MS, type LockAdapter, type SetupOptions } from './lock-adapter.js';

/** Its RedLock default pause is a fixed retryDelay of 200 ms: so many rounds cover WAIT_MS. */
const RETRY_ATTEMPTS = Math.ceil(WAIT_MS / 200);

interface Held {
  readonly lock: ReturnType<typeof createRedlock>;
  readonly handle: LockHandle;
}

export class RedlockUniversalAdapter implements LockAdapter<Held> {
  readonly name = 'redlock-universal';
  readonly packageName = 'redlock-universal';
  readonly settings = `retryAttempts ${RETRY_ATTEMPTS} (≈${WAIT_MS / 1000} s); default retryDelay 200 ms (no jitter)`;
  #clients: Redis[] = [];
  #adapters: IoredisAdapter[] = [];

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
    this.#adapters = this.#clients.map((client) => new IoredisAdapter(client));
  }

  /** A RedLock object per key is the library's API (`createRedlock({ key })`). */
  async acquire(key: string, ttlMs: number): Promise<Held> {
    const lock = createRedlock({ adapters: this.#adapters, key, ttl: ttlMs, retryAttempts: RETRY_ATTEMPTS });
    return { lock, handle: await lock.acquire() };
  }

  async release(held: Held): Promise<void> {
    await held.lock.release(held.handle);
  }

  async close(): Promise<void> {
    disconnect(this.#clients);
  }
}
