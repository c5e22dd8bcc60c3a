import { Catch, Optional, type ArgumentsHost } from '@nestjs/common';
import { BaseExceptionFilter, HttpAdapterHost } from '@nestjs/core';
import { LockHeldError, LockLostError, QuorumUnreachableError } from './core/base/errors.js';
import { lockHttpException, setRetryAfter } from './errors/lock-http-exception.js';

/**
 * Gives locks taken by hand (`RedlockService.using`, `acquire`, `assertValid`) in HTTP handlers
 * the same answers `@WithLock` routes get, instead of a 500: 409 with `Retry-After`, or 503.
 * Opt in with `{ provide: APP_FILTER, useClass: RedlockExceptionFilter }`.
 */
@Catch(LockHeldError, QuorumUnreachableError, LockLostError)
export class RedlockExceptionFilter extends BaseExceptionFilter {
  constructor(@Optional() private readonly adapterHost?: HttpAdapterHost) {
    super(adapterHost?.httpAdapter);
  }

  /** Answers a lock error of an HTTP handler as `@WithLock` would; anything else as Nest's default filter does. */
  override catch(error: LockHeldError | QuorumUnreachableError | LockLostError, host: ArgumentsHost): void {
    const exception = host.getType() === 'http' ? lockHttpException(error) : undefined;
    if (!exception) return super.catch(error, host);
    setRetryAfter(exception, host.switchToHttp().getResponse(), this.adapterHost);
    return super.catch(exception, host);
  }
}
