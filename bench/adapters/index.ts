import type { LockAdapter } from './lock-adapter.js';
import { NestjsRedlockAdapter } from './nestjs-redlock.js';
import { RedlockApiAdapter } from './redlock-api.js';
import { RedisSemaphoreAdapter } from './redis-semaphore.js';
import { RedlockUniversalAdapter } from './redlock-universal.js';
import { InProcessLimitAdapter } from './in-process-limit.js';

/**
 * `REDLOCK_BASE_DIR=<a checkout of another commit, with node_modules>`: the engine of that
 * checkout runs beside ours in every scenario, right after it, for what a change costs measured
 * side by side in one run (`git worktree add /tmp/base <commit>`, then link node_modules).
 */
const BASE_DIR = process.env['REDLOCK_BASE_DIR'];

/** Ours first; the rest are the peers of the issue, compared with the best of them. */
const FACTORIES = {
  'nestjs-redlock': () => new NestjsRedlockAdapter(),
  redlock: () => RedlockApiAdapter.nodeRedlock(),
  sesamecare: () => RedlockApiAdapter.sesamecare(),
  'redis-semaphore': () => new RedisSemaphoreAdapter(),
  'redlock-universal': () => new RedlockUniversalAdapter(),
} satisfies Record<string, () => LockAdapter>;

/**
 * Ours in another configuration, measured only when asked for (bench/telemetry.ts): never a
 * peer, never in the main report.
 */
const VARIANTS = {
  'nestjs-redlock+otel': () => new NestjsRedlockAdapter({ telemetry: {} }),
  'nestjs-redlock@base': () => new NestjsRedlockAdapter({ baseDir: BASE_DIR }),
  'nestjs-redlock+node-redis': () => new NestjsRedlockAdapter({ nodeRedis: true }),
} satisfies Record<string, () => LockAdapter>;

/** The contended scenarios' physical limit (no Redis lock at all): a reference row, never a peer. */
const REFERENCES = {
  limit: () => new InProcessLimitAdapter(),
} satisfies Record<string, () => LockAdapter>;

export type LibraryId = keyof typeof FACTORIES | keyof typeof VARIANTS | keyof typeof REFERENCES;
export const OURS: LibraryId = 'nestjs-redlock';
export const LIMIT: LibraryId = 'limit';
/** Ours, and with REDLOCK_BASE_DIR the base checkout's engine right after it: for scenarios that run no peer of every kind. */
export const OURS_AND_BASE = (BASE_DIR ? [OURS, 'nestjs-redlock@base'] : [OURS]) as LibraryId[];
/** The peer libraries, never ours in any configuration: what "the best peer" is chosen from. */
export const PEERS = Object.keys(FACTORIES).slice(1) as LibraryId[];
export const LIBRARIES: LibraryId[] = [...OURS_AND_BASE, ...PEERS];

export function createAdapter(id: LibraryId): LockAdapter {
  const factory =
    id in REFERENCES ? REFERENCES[id as keyof typeof REFERENCES] : id in VARIANTS ? VARIANTS[id as keyof typeof VARIANTS] : FACTORIES[id as keyof typeof FACTORIES];
  return factory() as LockAdapter;
}
