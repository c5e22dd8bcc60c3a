import type { LockAdapter, SetupOptions, SharedShape } from './lock-adapter.js';

/**
 * The physical limit of the contended scenarios: no Redis lock at all, but a perfect FIFO mutex
 * (or semaphore) in process memory, run by all the scenario's workers in ONE process. A release
 * hands the lock to the next waiter at once, so what is left is what the critical sections
 * alone take: every library's throughput is reported as a share of this one's.
 */
export class InProcessLimitAdapter implements LockAdapter<string> {
  readonly name = 'the limit: a perfect in-process FIFO mutex (a semaphore in 3b)';
  readonly packageName = 'nestjs-redlock';
  readonly settings = 'no Redis lock: every worker in one process, a FIFO queue in memory, hand-over on release';
  readonly #gates = new Map<string, Gate>();

  async setup(_urls: readonly string[], _options: SetupOptions): Promise<void> {}

  acquire(key: string): Promise<string> {
    return this.#gate(key, 1).enter().then(() => key);
  }

  acquireShared(key: string, _ttlMs: number, shape: SharedShape): Promise<string> {
    if (!('limit' in shape)) throw new Error('the in-process limit models a mutex or a semaphore only');
    return this.#gate(key, shape.limit).enter().then(() => key);
  }

  async release(key: string): Promise<void> {
    this.#gates.get(key)!.leave();
  }

  async close(): Promise<void> {}

  #gate(key: string, limit: number): Gate {
    let gate = this.#gates.get(key);
    if (!gate) this.#gates.set(key, (gate = new Gate(limit)));
    return gate;
  }
}

/** At most `limit` inside; the others wait in arrival order and get in as soon as one leaves. */
class Gate {
  #inside = 0;
  readonly #queue: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  enter(): Promise<void> {
    if (this.#inside < this.limit) {
      this.#inside++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#queue.push(resolve));
  }

  leave(): void {
    const next = this.#queue.shift();
    if (next) next(); // the place passes straight on: #inside stays the same
    else this.#inside--;
  }
}
