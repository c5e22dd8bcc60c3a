import { RedlockError } from '../core/base/errors.js';

/** Milliseconds of `performance.now()` as the seconds OpenTelemetry durations are in. */
export function seconds(ms: number): number {
  return ms / 1000;
}

/** `error.type`: the stable code of our errors (LOCK_HELD, ...), else the error's class name. */
export function errorType(error: unknown): string {
  if (error instanceof RedlockError) return error.code;
  if (error instanceof Error) return error.name || error.constructor.name;
  return '_OTHER';
}
