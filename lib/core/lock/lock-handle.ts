import { InvalidArgumentError } from '../base/errors.js';
import { kindOf, type LockKind } from './lock-kind.js';

/** What a handle carries: enough for another engine on the same masters to take the lock up. */
export interface HandleContent {
  readonly resources: readonly string[];
  /** The secret: whoever has it can extend and release the lock. */
  readonly token: string;
  readonly kind: LockKind;
  readonly ttlMs: number;
  readonly fence: number | undefined;
  readonly slots: readonly number[] | undefined;
}

const PREFIX = 'redlock-handle:1:';

/** A lock as a string for `redlock.adopt()`: opaque to its readers, and never to be logged. */
export function encodeHandle(lock: HandleContent): string {
  const content = {
    r: lock.resources,
    t: lock.token,
    m: lock.kind.mode,
    l: lock.kind.limit,
    ...(lock.kind.permits > 1 ? { p: lock.kind.permits } : {}),
    ttl: lock.ttlMs,
    ...(lock.fence === undefined ? {} : { f: lock.fence }),
    ...(lock.slots === undefined ? {} : { s: lock.slots }),
  };
  return PREFIX + Buffer.from(JSON.stringify(content)).toString('base64url');
}

/** Reads a handle; a string that is not one is refused without being echoed (it may hold a token). */
export function decodeHandle(handle: unknown): HandleContent {
  const refuse = (why: string) => new InvalidArgumentError('handle', '(not shown: a handle carries a secret)', why);
  if (typeof handle !== 'string' || !handle.startsWith(PREFIX)) throw refuse(`expected a string made by lock.handOver() (starting ${PREFIX})`);
  let content: { r?: unknown; t?: unknown; m?: unknown; l?: unknown; p?: unknown; ttl?: unknown; f?: unknown; s?: unknown };
  try {
    content = JSON.parse(Buffer.from(handle.slice(PREFIX.length), 'base64url').toString('utf8')) as typeof content;
  } catch {
    throw refuse('it does not decode: cut short, or changed');
  }
  const { r, t, m, l, p, ttl, f, s } = content;
  const resources = Array.isArray(r) && r.length > 0 && r.every((x) => typeof x === 'string') ? (r as string[]) : undefined;
  const slots = s === undefined ? undefined : Array.isArray(s) && s.every((x) => Number.isInteger(x)) ? (s as number[]) : null;
  if (!resources || typeof t !== 'string' || t.length === 0 || typeof ttl !== 'number' || slots === null || (f !== undefined && typeof f !== 'number')) {
    throw refuse('it does not decode: cut short, or changed');
  }
  const kind = kindOf({ mode: m, ...(typeof l === 'number' && l > 1 ? { limit: l } : {}), ...(p === undefined ? {} : { permits: p }) });
  if (slots !== undefined && slots.length !== resources.length * kind.permits) throw refuse('it does not decode: cut short, or changed');
  return { resources, token: t, kind, ttlMs: ttl, fence: f as number | undefined, slots };
}
