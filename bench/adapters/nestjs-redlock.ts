import type { Redis } from 'ioredis';
import { Redlock, type Lock } from '../../lib/core/index.js';
import { connect, disconnect } from '../support/clients.js';
import { WAIT_MS, type LockAdapter, type SetupOptions } from './lock-adapter.js';

export class NestjsRedlockAdapter implements LockAdapter<Lock> {
  readonly name = 'nestjs-redlock';
  readonly packageName = 'nestjs-redlock';
  readonly settings = `waitTimeoutMs ${WAIT_MS}; default retryDelayMs 50 + retryJitterMs 50 (uniform)`;
  #clients: Redis[] = [];
  #redlock: Redlock | undefined;

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
    this.#redlock = new Redlock(this.#clients, { waitTimeoutMs: WAIT_MS });
  }

  acquire(key: string, ttlMs: number): Promise<Lock> {
    return this.#redlock!.acquire(key, ttlMs);
  }

  async release(lock: Lock): Promise<void> {
    await lock.release();
  }

  async close(): Promise<void> {
    this.#redlock?.close(); // the connections it opened itself (wake-up subscribers)
    disconnect(this.#clients);
  }
}
