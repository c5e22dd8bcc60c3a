import { InvalidArgumentError } from '../base/errors.js';

/** `'write'`: the exclusive lock (the default). `'read'`: shared with other readers, exclusive of writers. */
export type LockMode = 'read' | 'write';

/**
 * What a hold is: the exclusive lock (a writer), a reader, or one of `limit` permits. Plain locks
 * and writers are the same thing on the masters, so a resource's family is "limit 1" (locks,
 * readers, writers) or "limit N" (permits). The kind's behaviour lives in lib/core/kinds/<type>/;
 * this is only what a lock reports and how errors name it.
 */
export interface LockKind {
  /** Which kind implements it (kinds/kinds.ts). */
  readonly type: 'write' | 'read' | 'permit';
  readonly mode: LockMode;
  /** How many holders the resource admits at once: a semaphore's limit, else 1. */
  readonly limit: number;
  /** How many of the `limit` permits one hold takes (a weighted permit), else 1. */
  readonly permits: number;
  /** The value a master keeps in the lock key while shared holders of this kind live there ('' for none). */
  readonly marker: string;
  /** How an error names it: 'lock', 'read', 'limit N'. */
  readonly name: string;
  /** Kinds of one family can meet on a resource (and wait for each other); others are a mistake. */
  readonly family: string;
}

export const WRITE: LockKind = { type: 'write', mode: 'write', limit: 1, permits: 1, marker: '', name: 'lock', family: 'lock' };
export const READ: LockKind = { type: 'read', mode: 'read', limit: 1, permits: 1, marker: '*r', name: 'read', family: 'lock' };

/**
 * Permits of a semaphore: every weight of one limit shares its marker, family and name (they
 * meet on the same resource and count against the same limit), and only the weight tells them
 * apart (Kinds keeps one implementation per limit and weight).
 */
function permit(limit: number, permits: number): LockKind {
  return { type: 'permit', mode: 'write', limit, permits, marker: `*s${limit}`, name: `limit ${limit}`, family: `limit ${limit}` };
}

/** Large enough for any partner API's concurrency, small enough that a script's slot scan stays cheap. */
export const MAX_LIMIT = 1_000;

/** The kind a call asks for through its `mode`, `limit` and `permits` options; throws on a bad value and on a read semaphore. */
export function kindOf(options: { readonly mode?: unknown; readonly limit?: unknown; readonly permits?: unknown }): LockKind {
  const { mode, limit, permits } = options;
  if (mode !== undefined && mode !== 'read' && mode !== 'write') {
    throw new InvalidArgumentError('mode', mode, "expected 'read' or 'write'");
  }
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
    throw new InvalidArgumentError('limit', limit, `expected a whole number from 1 to ${MAX_LIMIT}`);
  }
  const max = typeof limit === 'number' ? limit : 1;
  if (permits !== undefined && (typeof permits !== 'number' || !Number.isInteger(permits) || permits < 1 || permits > max)) {
    const why = max > 1 ? `expected a whole number from 1 to the limit, ${max}` : 'expected 1: several permits are taken from a semaphore (a `limit` above 1, at least `permits`)';
    throw new InvalidArgumentError('permits', permits, why);
  }
  if (limit !== undefined && limit > 1) {
    // A read-write semaphore is another concept: say so rather than pick one meaning.
    if (mode === 'read') throw new InvalidArgumentError('mode', mode, 'a semaphore (limit > 1) has no read mode');
    return permit(limit, (permits as number | undefined) ?? 1);
  }
  return mode === 'read' ? READ : WRITE;
}

/** How an error names a kind, or the kind a master found (a marker, or a token: a lock). */
export function describeKind(kind: LockKind | string): string {
  if (typeof kind !== 'string') return kind.name;
  if (kind === READ.marker) return READ.name;
  if (kind.startsWith('*s')) return `limit ${kind.slice(2)}`;
  return WRITE.name;
}
