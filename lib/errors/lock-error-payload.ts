import { LockHeldError, RedlockError, type RedlockErrorCode } from '../core/base/errors.js';
import { retryAfterMsOf } from './retry-after.js';
import { lockHttpException } from './lock-http-exception.js';
import { LockKeyArgumentError } from './lock-key-argument.error.js';

/**
 * What a client of a message, websocket or GraphQL handler is told when the handler's lock
 * cannot be had: the same facts as the HTTP answers (409, 503, 400), in the shape Nest's RPC and
 * websocket errors take (`status: 'error'`).
 */
export interface LockErrorPayload {
  /** Always `'error'`, as in the errors Nest's RPC and websocket layers send. */
  readonly status: 'error';
  /** The core error's stable code: `LOCK_HELD`, `QUORUM_UNREACHABLE`, `LOCK_LOST` or `INVALID_ARGUMENT`. */
  readonly code: RedlockErrorCode;
  /** For the client: names the resources, never the masters or the lock token. */
  readonly message: string;
  /** The resources of the lock (absent for `INVALID_ARGUMENT`: no key could be formed). */
  readonly resources?: readonly string[];
  /**
   * When the lock may be had, in ms: for `LOCK_HELD` the value the 409's `Retry-After` is made
   * from (for a `@WithLock` handler an estimate from its recent hold durations, at least 1000 and
   * at most the holder's remaining ttl; for a lock taken by hand the holder's remaining ttl); for
   * `QUORUM_UNREACHABLE` when restarted masters vote again. Absent when unknown.
   */
  readonly retryAfterMs?: number;
  /** `INVALID_ARGUMENT`: the key placeholder the client's argument could not fill, `{0.id}`. */
  readonly placeholder?: string;
}

/**
 * The payload for a lock error a client should hear about: a lock held elsewhere, too few
 * masters, a lock lost midway, or a key argument that cannot form a key. Undefined for any other
 * error, which is the handler's own business. The transport subpaths wrap it in their exceptions.
 */
export function lockErrorPayload(error: unknown): LockErrorPayload | undefined {
  if (error instanceof LockKeyArgumentError) {
    return { status: 'error', code: error.code, message: error.publicMessage, placeholder: error.placeholder };
  }
  if (!(error instanceof RedlockError)) return undefined;
  const http = lockHttpException(error);
  if (!http) return undefined;
  const { message, resources } = http.getResponse() as { message: string; resources: readonly string[] };
  const retryAfterMs = error instanceof LockHeldError ? retryAfterMsOf(error) : (error as { retryAfterMs?: number }).retryAfterMs;
  return { status: 'error', code: error.code, message, resources, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}
