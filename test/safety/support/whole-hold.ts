import type { Redis } from 'ioredis';
import type { Lock, Redlock } from '../../../lib/core/index.js';
import { disconnectAll } from '../../support/masters.js';
import type { ViolationKind } from './checker.js';
import type { LocalHolder } from './local-holder.js';
import type { Kind } from './scenario-kit.js';

/**
 * Takes by A that left it too little validity to be an episode (`isShort`), undone and retried at
 * most this many times per run; after that they count as episodes.
 */
export const MAX_SHORT_HOLDS = 3;

/**
 * A control must show the double grant, and on a loaded machine one episode's workers may not get
 * through to the promoted replica before A's lock ends: a control with no takeover yet runs up to
 * this many episodes.
 */
const CONTROL_EPISODES = 3;
/** What a control's extra episodes may add to its test's timeout: up to 25 s each under double load. */
export const CONTROL_EXTRA_MS = (CONTROL_EPISODES - 1) * 25_000;

/**
 * Whether a failover run goes on to another episode: until its time is up and it has had one, and
 * a control until it has shown a takeover or had its episodes.
 */
export function anotherEpisode(run: { endAt: number; episodes: number; quarantine: boolean; takeovers: number }): boolean {
  if (performance.now() < run.endAt || run.episodes === 0) return true;
  return !run.quarantine && run.takeovers === 0 && run.episodes < CONTROL_EPISODES;
}

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
    private readonly ttl: number,
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
    return new WholeHold(holder, kind, locks, ttl);
  }

  /** The validity A can still count on: its shortest hold's. */
  remainingMs(): number {
    return Math.min(...this.locks.map((lock) => lock.remainingMs()));
  }

  /**
   * Whether less than half the ttl is left: a semaphore's last permit waited so long (a loaded
   * machine) that its first has aged. Too short a window to see a takeover in; the scenarios undo
   * such a take and try again rather than count it.
   */
  isShort(): boolean {
    return this.remainingMs() < this.ttl / 2;
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

  /** A's part of an episode is over: its holds released, its engine closed, its connections dropped. */
  async end(engine: Redlock, connections: Redis[]): Promise<void> {
    await this.release();
    engine.close();
    disconnectAll(connections.splice(0));
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
