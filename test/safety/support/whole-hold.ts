import type { Redis } from 'ioredis';
import type { Lock } from '../../../lib/core/index.js';
import type { ViolationKind } from './checker.js';
import type { LocalHolder } from './local-holder.js';
import type { Kind } from './scenario-kit.js';

/**
 * What holder A takes in the failover scenarios: the whole resource under each kind, so that any
 * other holder while A holds is a violation the checker flags, whatever the kind. For the lock,
 * the lock; for a read-write lock, a writer (the workers are readers and writers); for a
 * semaphore, every permit (two holds of limit 2, from one engine: plain acquires are not
 * reentrant, each is a permit of its own).
 */
export class WholeHold {
  private constructor(
    private readonly holder: LocalHolder,
    readonly kind: Kind,
    readonly locks: readonly Lock[],
  ) {}

  static async take(holder: LocalHolder, kind: Kind, resource: string, ttl: number, waitTimeoutMs: number): Promise<WholeHold> {
    const locks: Lock[] = [];
    try {
      if (kind.name === 'semaphore') {
        for (let i = 0; i < kind.shared.limit; i++) locks.push(await holder.acquire(resource, ttl, waitTimeoutMs, { limit: kind.shared.limit }));
      } else {
        locks.push(await holder.acquire(resource, ttl, waitTimeoutMs, kind.name === 'read-write' ? { mode: 'write' } : {}));
      }
    } catch (error) {
      await Promise.all(locks.map((lock) => holder.release(lock)));
      throw error;
    }
    return new WholeHold(holder, kind, locks);
  }

  /** The validity A can still count on: its shortest hold's. */
  remainingMs(): number {
    return Math.min(...this.locks.map((lock) => lock.remainingMs()));
  }

  /** Whether A writes to the store under this hold: permits share the resource and leave the store alone. */
  get writes(): boolean {
    return this.kind.name !== 'semaphore';
  }

  read(): { accepted: boolean; value: number; plain: number } | undefined {
    return this.writes ? this.holder.read(this.locks[0]!) : undefined;
  }

  /** A's write after the fault, if it writes at all: undefined for permits. */
  write(read: { value: number; plain: number } | undefined, marginMs: number): { accepted: boolean } | undefined {
    return read && this.holder.write(this.locks[0]!, read, marginMs);
  }

  async release(): Promise<void> {
    await Promise.all(this.locks.map((lock) => this.holder.release(lock)));
  }

  /** Whether `server` has every one of A's holds: the lock key for a lock or writer, the holders hash for permits. */
  async isOn(server: Redis, names: { lock: string; holders: string }): Promise<boolean> {
    if (this.kind.name !== 'semaphore') return (await server.get(names.lock)) === this.locks[0]!.token;
    const held = await Promise.all(this.locks.map((lock) => server.hexists(names.holders, lock.token)));
    return held.every((one) => one === 1);
  }

  /** Whether `server` has none of A's holds. */
  async isNotOn(server: Redis, names: { lock: string; holders: string }): Promise<boolean> {
    if (this.kind.name !== 'semaphore') return (await server.get(names.lock)) !== this.locks[0]!.token;
    const held = await Promise.all(this.locks.map((lock) => server.hexists(names.holders, lock.token)));
    return held.every((one) => one === 0);
  }
}

/** The violations a second holder beside A makes under each kind: what a control must show. */
export function takeoverViolations(kind: Kind): readonly ViolationKind[] {
  if (kind.name === 'semaphore') return ['over-limit'];
  if (kind.name === 'read-write') return ['overlap', 'writer-shared'];
  return ['overlap'];
}
