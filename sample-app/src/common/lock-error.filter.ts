import { Catch, type ArgumentsHost, type ExceptionFilter, ServiceUnavailableException } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { LockConflictException, LockHeldError, LockLostError, LockUnavailableException, QuorumUnreachableError } from 'nestjs-redlock';

/**
 * HTTP answers for lock errors that no interceptor maps: @WithLock routes already get
 * 409 / 503 for a lock they cannot take, but locks taken by hand (RedlockService.using in the
 * transfer) and a lock lost before a write (assertValid) reach Nest as plain errors, which
 * would be a 500. Mapped the same way, so a client sees one contract everywhere.
 */
@Catch(LockHeldError, QuorumUnreachableError, LockLostError)
export class LockErrorFilter extends BaseExceptionFilter implements ExceptionFilter {
  override catch(error: LockHeldError | QuorumUnreachableError | LockLostError, host: ArgumentsHost): void {
    if (error instanceof LockHeldError) {
      const conflict = LockConflictException.fromError(error);
      host.switchToHttp().getResponse<{ setHeader(n: string, v: string): void }>().setHeader('Retry-After', String(conflict.retryAfterSeconds));
      return super.catch(conflict, host);
    }
    if (error instanceof QuorumUnreachableError) return super.catch(LockUnavailableException.fromError(error), host);
    // Nothing was written: the lock was gone before the write, so the operation stopped short.
    return super.catch(new ServiceUnavailableException(`lock on ${error.resources.join(', ')} lost before writing; nothing was changed`), host);
  }
}
