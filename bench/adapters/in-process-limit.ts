import type { LockAdapter, SetupOptions, SharedShape } from './lock-adapter.js';

/**
 * The physical limit of the contended scenarios: no Redis lock at all, but a perfect FIFO mutex
 * (or semaphore, or read-write lock) in process memory, run by all the scenario's workers in ONE
 * process. A release hands the lock to the next waiter at once, so what is left is what the
 * critical sections alone take: every library's throughput is reported as a share of this one's.
 */
export class InProcessLimitAdapter implements LockAdapter<string> {
  readonly name = 'the limit: a perfect in-process FIFO mutex (a semaphore in 3b, a read-write lock in 3c/3d)';
  readonly packageName = 'nestjs-redlock';
  readonly settings = 'no Redis lock: every worker in one process, a FIFO queue in memory, hand-over on release';
  /** One gate per key, of the kind its first acquire asked for (a scenario never mixes kinds on a key). */
  readonly #gates = new Map<string, Gate | ReadWriteGate>();

  async setup(_urls: readonly string[], _options: SetupOptions): Promise<void> {}

  acquire(key: string): Promise<string> {
    return this.#gate(key, 1).enter().then(() => key);
  }

  acquireShared(key: string, _ttlMs: number, shape: SharedShape): Promise<string> {
    if ('mode' in shape) return this.#readWriteGate(key).enter(shape.mode).then(() => key);
    const permits = shape.permits ?? 1;
    return this.#gate(key, shape.limit)
      .enter(permits)
      .then(() => (permits > 1 ? `${key}\n${permits}` : key));
  }

  /** The handle is the key, with the weight after a newline for a weighted permit. */
  async release(handle: string): Promise<void> {
    const [key, permits] = handle.split('\n');
    const gate = this.#gates.get(key!)!;
    if (gate instanceof Gate) gate.leave(Number(permits ?? 1));
    else gate.leave();
  }

  async close(): Promise<void> {}

  #gate(key: string, limit: number): Gate {
    let gate = this.#gates.get(key);
    if (!gate) this.#gates.set(key, (gate = new Gate(limit)));
    if (!(gate instanceof Gate)) throw new Error(`key ${key} is a read-write lock, not a mutex or semaphore`);
    return gate;
  }

  #readWriteGate(key: string): ReadWriteGate {
    let gate = this.#gates.get(key);
    if (!gate) this.#gates.set(key, (gate = new ReadWriteGate()));
    if (!(gate instanceof ReadWriteGate)) throw new Error(`key ${key} is a mutex or semaphore, not a read-write lock`);
    return gate;
  }
}

/**
 * At most `limit` permits inside; the others wait in arrival order and get in as soon as enough
 * have left for the head of the line (a weighted request is not overtaken by smaller ones).
 */
class Gate {
  #inside = 0;
  readonly #queue: { permits: number; resolve: () => void }[] = [];

  constructor(private readonly limit: number) {}

  enter(permits = 1): Promise<void> {
    if (this.#queue.length === 0 && this.#inside + permits <= this.limit) {
      this.#inside += permits;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#queue.push({ permits, resolve }));
  }

  leave(permits = 1): void {
    this.#inside -= permits;
    while (this.#queue[0] && this.#inside + this.#queue[0].permits <= this.limit) {
      const next = this.#queue.shift()!;
      this.#inside += next.permits;
      next.resolve();
    }
  }
}

/**
 * Readers share, a writer is alone; waiters get in strictly in arrival order, so a writer waits
 * only for those who asked before it (no writer starves behind a stream of readers, no reader
 * behind a stream of writers). A reader gets in at once only while readers hold and nobody
 * waits; a release lets in the head of the queue: one writer, or every reader up to the next
 * writer. That is the most readers a FIFO-fair lock can let hold together.
 */
class ReadWriteGate {
  #readers = 0;
  #writer = false;
  readonly #queue: { mode: 'read' | 'write'; resolve: () => void }[] = [];

  enter(mode: 'read' | 'write'): Promise<void> {
    // A waiter at the head means someone asked first: get in line behind them.
    if (this.#queue.length === 0 && !this.#writer && (mode === 'read' || this.#readers === 0)) {
      if (mode === 'read') this.#readers++;
      else this.#writer = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#queue.push({ mode, resolve }));
  }

  /** Inside is either one writer or only readers, so who leaves needs no handle. */
  leave(): void {
    if (this.#writer) this.#writer = false;
    else this.#readers--;
    if (this.#readers > 0) return; // readers still hold: the head of the queue is a writer, it waits for them
    if (this.#queue[0]?.mode === 'write') {
      this.#writer = true;
      this.#queue.shift()!.resolve();
      return;
    }
    while (this.#queue[0]?.mode === 'read') {
      this.#readers++;
      this.#queue.shift()!.resolve();
    }
  }
}
