import type { Redis } from 'ioredis';
import NodeRedlock from 'redlock';
import { Redlock as SesamecareRedlock } from '@sesamecare-oss/redlock';
import { connect, disconnect } from '../support/clients.js';
import { WAIT_MS, type LockAdapter, type SetupOptions } from './lock-adapter.js';

/** Both packages' default pause is retryDelay 200 ms ± retryJitter 100 ms: so many rounds cover WAIT_MS. */
const RETRY_COUNT = Math.ceil(WAIT_MS / 200);

interface HeldLock {
  release(): Promise<unknown>;
}

/** What node-redlock 5 and its fork @sesamecare-oss/redlock share. */
interface RedlockApi {
  acquire(resources: string[], ttlMs: number): Promise<HeldLock>;
  on(event: 'error', listener: () => void): unknown;
}

type RedlockApiConstructor = new (clients: Redis[], settings: { retryCount: number }) => RedlockApi;

/** node-redlock 5 and @sesamecare-oss/redlock: one API, so one adapter. */
export class RedlockApiAdapter implements LockAdapter<HeldLock> {
  readonly settings = `retryCount ${RETRY_COUNT} (≈${WAIT_MS / 1000} s at the default pause); default retryDelay 200 ± retryJitter 100 ms`;
  #clients: Redis[] = [];
  #redlock: RedlockApi | undefined;

  private constructor(
    readonly name: string,
    private readonly Redlock: RedlockApiConstructor,
  ) {}

  get packageName(): string {
    return this.name;
  }

  static nodeRedlock(): RedlockApiAdapter {
    return new RedlockApiAdapter('redlock', NodeRedlock as unknown as RedlockApiConstructor);
  }

  static sesamecare(): RedlockApiAdapter {
    return new RedlockApiAdapter('@sesamecare-oss/redlock', SesamecareRedlock as unknown as RedlockApiConstructor);
  }

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
    this.#redlock = new this.Redlock(this.#clients, { retryCount: RETRY_COUNT });
    this.#redlock.on('error', () => {}); // it reports every refused vote as an 'error' event
  }

  acquire(key: string, ttlMs: number): Promise<HeldLock> {
    return this.#redlock!.acquire([key], ttlMs);
  }

  async release(lock: HeldLock): Promise<void> {
    await lock.release();
  }

  async close(): Promise<void> {
    disconnect(this.#clients);
  }
}
