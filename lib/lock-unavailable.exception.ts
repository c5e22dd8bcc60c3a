import { HttpException, HttpStatus } from '@nestjs/common';
import type { QuorumUnreachableError } from './core/errors.js';

/**
 * 503 Service Unavailable: too few Redis masters answered to take the lock. The body names the
 * resources but not the masters, whose addresses are no business of the client.
 */
export class LockUnavailableException extends HttpException {
  constructor(
    readonly resources: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(
      {
        statusCode: HttpStatus.SERVICE_UNAVAILABLE,
        error: 'Service Unavailable',
        message: `the lock on ${resources.join(', ')} cannot be taken: too few lock servers are reachable`,
        resources: [...resources],
      },
      HttpStatus.SERVICE_UNAVAILABLE,
      options,
    );
  }

  static fromError(error: QuorumUnreachableError): LockUnavailableException {
    return new LockUnavailableException(error.resources, { cause: error });
  }
}
