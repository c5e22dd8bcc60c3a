import type { Redis } from 'ioredis';
import Redlock, { type Lock } from 'redlock';
import { connect, disconnect } from '../support/clients.js';
import { WAIT_MS, type LockAdapter, type SetupOptions } from './lock-adapter.js';

/** Its default pause is retryDelay 200 ms +- retryJitter 100 ms: so many rounds cover WAIT_MS. */
const RETRY_COUNT = Math.ceil(WAIT_MS / 200);

export class NodeRedlockAdapter implements LockAdapter<Lock> {
  readonly name = 'redlock';
  readonly packageName = 'redlock';
  readonly settings = `retryCount ${RETRY_COUNT} (≈${WAIT_MS / 1000} s at the default pause); default retryDelay 200 ± retryJitter 100 ms`;
  #clients: Redis[] = [];
  #redlock: Redlock | undefined;

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
    this.#redlock = new Redlock(this.#clients, { retryCount: RETRY_COUNT });
    this.#redlock.on('error', () => {}); // it reports every refused vote as an 'error' event
  }

  acquire(key: string, ttlMs: number): Promise<Lock> {
    return this.#redlock!.acquire([key], ttlMs);
  }

  async release(lock: Lock): Promise<void> {
    await lock.release();
  }

  async close(): Promise<void> {
    disconnect(this.#clients);
  }
}
