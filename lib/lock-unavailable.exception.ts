import { HttpException, HttpStatus } from '@nestjs/common';
import type { LockLostError, QuorumUnreachableError } from './core/errors.js';

/**
 * 503 Service Unavailable: too few Redis masters answered to take the lock, or the lock was lost
 * before the work could finish. The body names the resources but not the masters, whose
 * addresses are no business of the client.
 */
export class LockUnavailableException extends HttpException {
  constructor(
    readonly resources: readonly string[],
    options?: { cause?: unknown; message?: string },
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
  }

  static fromError(error: QuorumUnreachableError): LockUnavailableException {
    return new LockUnavailableException(error.resources, { cause: error });
  }

  static fromLost(error: LockLostError): LockUnavailableException {
    const message = `the lock on ${error.resources.join(', ')} was lost before the operation finished; retry`;
    return new LockUnavailableException(error.resources, { cause: error, message });
  }
}
