import { BadRequestException, HttpStatus } from '@nestjs/common';
import type { LockKeyArgumentError } from './lock-key-argument.error.js';

/**
 * 400 Bad Request: an argument of a decorated route, which the client sent, cannot form the lock
 * key (a JSON object where the key reads a scalar, a missing parameter). The body names the
 * placeholder and the template, not the class and method behind them.
 */
export class LockKeyBadRequestException extends BadRequestException {
  constructor(
    /** The placeholder that could not be filled, as written: `{0.id}`. */
    readonly placeholder: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super({ statusCode: HttpStatus.BAD_REQUEST, error: 'Bad Request', message, placeholder }, options);
  }

  /** The 400 for a `LockKeyArgumentError`: its `publicMessage` and placeholder, never the class and method. */
  static fromError(error: LockKeyArgumentError): LockKeyBadRequestException {
    return new LockKeyBadRequestException(error.placeholder, error.publicMessage, { cause: error });
  }
}
