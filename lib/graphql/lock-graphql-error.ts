import { GraphQLError } from 'graphql';
import type { RedlockErrorCode } from '../core/base/errors.js';
import { lockErrorPayload } from '../errors/lock-error-payload.js';

/** `extensions.code` by the lock error's code, in the vocabulary GraphQL servers use for HTTP's 409, 503 and 400. */
const GRAPHQL_CODES: Partial<Record<RedlockErrorCode, string>> = {
  LOCK_HELD: 'CONFLICT',
  QUORUM_UNREACHABLE: 'SERVICE_UNAVAILABLE',
  LOCK_LOST: 'SERVICE_UNAVAILABLE',
  INVALID_ARGUMENT: 'BAD_USER_INPUT',
};

/**
 * The GraphQL answer to a lock error (held elsewhere, too few masters, lost, or a key the
 * arguments cannot form): a `GraphQLError` with `extensions.code` `CONFLICT`,
 * `SERVICE_UNAVAILABLE` or `BAD_USER_INPUT`, and the rest of the `LockErrorPayload` beside it
 * (`lockCode` is the core error's code, plus `resources`, `retryAfterMs`, `placeholder`).
 * Undefined for any other error. `RedlockInterceptor` applies it to `@WithLock` resolvers; use it
 * for locks taken by hand. The core error is not attached: its message names the masters.
 */
export function lockGraphQLError(error: unknown): GraphQLError | undefined {
  const payload = lockErrorPayload(error);
  if (!payload) return undefined;
  const { status: _status, code, message, ...facts } = payload;
  return new GraphQLError(message, { extensions: { code: GRAPHQL_CODES[code] ?? 'INTERNAL_SERVER_ERROR', lockCode: code, ...facts } });
}
