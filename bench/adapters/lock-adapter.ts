/**
 * One interface over every library, so each scenario is written once and every library runs
 * the very same loop. `H` is the library's own lock handle, opaque to the scenarios.
 */
export interface LockAdapter<H = unknown> {
  /** Shown in the tables. */
  readonly name: string;
  /** npm package the version is read from. */
  readonly packageName: string;
  /** What this adapter sets beyond the shared connection settings, for RESULTS.md. */
  readonly settings: string;
  setup(urls: readonly string[], options: SetupOptions): Promise<void>;
  /** Waits while the key is held elsewhere (up to WAIT_MS), the library's own way. */
  acquire(key: string, ttlMs: number): Promise<H>;
  release(handle: H): Promise<void>;
  close(): Promise<void>;
  /**
   * For the semaphore and read-write scenarios, where the library has them: a permit of a
   * semaphore of `limit`, or a reader / writer. Absent: the library has neither.
   */
  acquireShared?(key: string, ttlMs: number, shape: SharedShape): Promise<H>;
}

/** What a shared acquisition asks for: a permit of `limit` (or `permits` of them, weighted), or a reader or writer. */
export type SharedShape = { readonly limit: number; readonly permits?: number } | { readonly mode: 'read' | 'write' };

export interface SetupOptions {
  /** ioredis `enableAutoPipelining`, given to every library alike. */
  autoPipelining: boolean;
}

/** How long any library may wait for a contended lock: the hot-key scenario relies on it. */
export const WAIT_MS = 30_000;
