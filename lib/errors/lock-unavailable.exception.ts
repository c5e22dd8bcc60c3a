import { HttpException, HttpStatus } from '@nestjs/common';
import type { LockLostError, QuorumUnreachableError } from '../core/base/errors.js';

/**
 * 503 Service Unavailable: too few Redis masters answered to take the lock, or the lock was lost
 * before the work could finish. The body names the resources but not the masters, whose
 * addresses are no business of the client. When the masters are only in restart quarantine,
 * `retryAfterSeconds` says when they vote again (sent as `Retry-After`).
 */
export class LockUnavailableException extends HttpException {
  /** Whole seconds, at least 1, when known: the lock servers are back from a restart by then. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    /** The resources of the lock that could not be taken, or was lost. */
    readonly resources: readonly string[],
    options?: { cause?: unknown; message?: string; retryAfterSeconds?: number },
  ) {
    super(
      {
        statusCode: HttpStatus.SERVICE_UNAVAILABLE,
        error: 'Service Unavailable',
        message: options?.message ?? `the lock on ${resources.join(', ')} cannot be taken: too few lock servers are reachable`,
        resources: [...resources],
      },
      HttpStatus.SERVICE_UNAVAILABLE,
      options,
    );
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  /** The 503 for a `QuorumUnreachableError`, with `retryAfterSeconds` when the masters are in restart quarantine. */
  static fromError(error: QuorumUnreachableError): LockUnavailableException {
    if (error.retryAfterMs === undefined) return new LockUnavailableException(error.resources, { cause: error });
    const retryAfterSeconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
    const message =
      `the lock on ${error.resources.join(', ')} cannot be taken yet: the lock servers restarted recently ` +
      `and can grant locks again in ${retryAfterSeconds} s`;
    return new LockUnavailableException(error.resources, { cause: error, message, retryAfterSeconds });
  }

  /** The 503 for a `LockLostError`: the lock was lost before the work finished. */
  static fromLost(error: LockLostError): LockUnavailableException {
    const message = `the lock on ${error.resources.join(', ')} was lost before the operation finished; retry`;
    return new LockUnavailableException(error.resources, { cause: error, message });
  }
}
