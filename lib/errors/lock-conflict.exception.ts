import { HttpException, HttpStatus } from '@nestjs/common';
import type { LockHeldError } from '../core/base/errors.js';
import { retryAfterMsOf } from './retry-after.js';

/**
 * 409 Conflict: the resource is locked by another operation (fail-fast policy, or the wait ran
 * out). The body names the resources, never the lock token; `retryAfterSeconds` is what the
 * interceptor sends as `Retry-After`.
 */
export class LockConflictException extends HttpException {
  constructor(
    /** The resources held elsewhere, as the lock named them. */
    readonly resources: readonly string[],
    /**
     * Whole seconds, at least 1: when the lock is likely free. For a `@WithLock` method, from how
     * long it has held its lock recently (HoldTimes), at most the holder's remaining ttl; for a
     * lock taken by hand, the holder's remaining ttl (when it expires at the latest, unless extended).
     */
    readonly retryAfterSeconds: number,
    options?: { cause?: unknown },
  ) {
    super(
      {
        statusCode: HttpStatus.CONFLICT,
        error: 'Conflict',
        message: `${resources.join(', ')} ${resources.length === 1 ? 'is' : 'are'} locked by another operation; retry later`,
        resources: [...resources],
      },
      HttpStatus.CONFLICT,
      options,
    );
  }

  /**
   * The 409 for a `LockHeldError`: its resources, and when to retry rounded up to whole seconds:
   * the estimate its `@WithLock` method made, else its `retryAfterMs` (the holder's remaining ttl).
   */
  static fromError(error: LockHeldError): LockConflictException {
    const seconds = Math.max(1, Math.ceil((retryAfterMsOf(error) ?? 0) / 1000));
    return new LockConflictException(error.resources, seconds, { cause: error });
  }
}
