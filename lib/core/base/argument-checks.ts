import { InvalidArgumentError } from './errors.js';

// The checks every argument of a call goes through before anything is sent: each a typed error
// that names the argument, the value and what was expected.

/**
 * The default cap on a ttl (the engine's `maxTtlMs`): large enough for any job that extends its
 * lock, small enough to catch a unit mistake.
 */
export const MAX_TTL_MS = 24 * 60 * 60 * 1000;

/** `maxTtlMs` is the engine's cap (MAX_TTL_MS unless raised knowingly). */
export function checkTtl(argument: string, ttlMs: unknown, maxTtlMs = MAX_TTL_MS): number {
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs <= 0 || ttlMs > maxTtlMs) {
    const raise = maxTtlMs === MAX_TTL_MS ? '; a longer ttl needs the maxTtlMs option' : ' (maxTtlMs)';
    throw new InvalidArgumentError(argument, ttlMs, `expected an integer number of ms in [1, ${maxTtlMs}]${raise}`);
  }
  return ttlMs;
}

/** A timer's delay for `ms`: a longer wait than a timer can hold is cut to what it can (the timer then re-arms). */
export function timerDelay(ms: number): number {
  return Math.min(MAX_DELAY_MS, Math.max(0, ms));
}

export function checkResources(resources: unknown, maxResources: number): string[] {
  if (typeof resources === 'string' && resources.length > 0) return [resources];
  const list = typeof resources === 'string' ? [resources] : resources;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidArgumentError('resources', resources, 'expected a non-empty string or a non-empty array of them');
  }
  if (list.length > maxResources) {
    throw new InvalidArgumentError('resources', resources, `expected at most ${maxResources} resources per lock (maxResources)`);
  }
  for (const resource of list) {
    if (typeof resource !== 'string' || resource.length === 0) {
      throw new InvalidArgumentError('resource', resource, 'expected a non-empty string');
    }
  }
  // Duplicates would make the all-or-nothing script see its own key as taken.
  return [...new Set(list as string[])];
}

export function checkPositiveInteger(argument: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new InvalidArgumentError(argument, value, 'expected a positive integer');
  }
}

export function checkCount(argument: string, value: unknown): void {
  const ok = typeof value === 'number' && value >= 0 && (Number.isInteger(value) || value === Number.POSITIVE_INFINITY);
  if (!ok) throw new InvalidArgumentError(argument, value, 'expected a non-negative integer or Infinity');
}

/** The longest a Node timer can wait; a longer delay fires after 1 ms instead. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/** A time the engine waits out on a timer: longer than a timer can wait would mean not at all. */
export function isDelay(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_DELAY_MS;
}

export function checkDelay(argument: string, value: unknown): void {
  if (!isDelay(value)) throw new InvalidArgumentError(argument, value, `expected a number of ms in [0, ${MAX_DELAY_MS}]`);
}

export function checkFlag(argument: string, value: unknown): void {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(argument, value, 'expected true or false');
}

/** How long a health check waits for each master's reply: a timer, so more than 0 and no longer than a timer can wait. */
export function checkProbeTimeout(timeoutMs: unknown): number {
  if (!isDelay(timeoutMs) || timeoutMs === 0) {
    throw new InvalidArgumentError('timeoutMs', timeoutMs, `expected a number of ms in (0, ${MAX_DELAY_MS}]`);
  }
  return timeoutMs;
}
