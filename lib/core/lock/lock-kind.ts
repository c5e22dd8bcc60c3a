import { InvalidArgumentError } from '../base/errors.js';

/** `'write'`: the exclusive lock (the default). `'read'`: shared with other readers, exclusive of writers. */
export type LockMode = 'read' | 'write';

/**
 * What a hold is: the exclusive lock (a writer), a reader, or one of `limit` permits. Plain locks
 * and writers are the same thing on the masters, so a resource's family is "limit 1" (locks,
 * readers, writers) or "limit N" (permits).
 */
export type LockKind =
  | { readonly type: 'write' }
  | { readonly type: 'read' }
  | { readonly type: 'permit'; readonly limit: number };

export const WRITE: LockKind = { type: 'write' };
const READ: LockKind = { type: 'read' };

/** Large enough for any partner API's concurrency, small enough that a script's slot scan stays cheap. */
export const MAX_LIMIT = 1_000;

/** The kind a call asks for through its `mode` and `limit` options; throws on a bad value and on a read semaphore. */
export function kindOf(options: { readonly mode?: unknown; readonly limit?: unknown }): LockKind {
  const { mode, limit } = options;
  if (mode !== undefined && mode !== 'read' && mode !== 'write') {
    throw new InvalidArgumentError('mode', mode, "expected 'read' or 'write'");
  }
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
    throw new InvalidArgumentError('limit', limit, `expected a whole number from 1 to ${MAX_LIMIT}`);
  }
  if (limit !== undefined && limit > 1) {
    // A read-write semaphore is another concept: say so rather than pick one meaning.
    if (mode === 'read') throw new InvalidArgumentError('mode', mode, 'a semaphore (limit > 1) has no read mode');
    return { type: 'permit', limit };
  }
  return mode === 'read' ? READ : WRITE;
}

/** The value a master keeps in the lock key while shared holders of this kind live there. */
export function markerOf(kind: LockKind): string {
  return kind.type === 'read' ? '*r' : kind.type === 'permit' ? `*s${kind.limit}` : '';
}

/** How an error names a kind, or the kind a master found (a marker, or a token: a lock). */
export function describeKind(kind: LockKind | string): string {
  if (typeof kind !== 'string') return kind.type === 'permit' ? `limit ${kind.limit}` : kind.type === 'read' ? 'read' : 'lock';
  if (kind === '*r') return 'read';
  if (kind.startsWith('*s')) return `limit ${kind.slice(2)}`;
  return 'lock';
}

/** The family a kind belongs to, for mismatch checks: locks, readers and writers are one. */
export function familyOf(kind: LockKind): string {
  return kind.type === 'permit' ? `limit ${kind.limit}` : 'lock';
}
