import type { HttpException } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import { LockHeldError, LockLostError, QuorumUnreachableError, type RedlockError } from '../core/base/errors.js';
import { LockConflictException } from './lock-conflict.exception.js';
import { LockUnavailableException } from './lock-unavailable.exception.js';

/**
 * One HTTP contract for lock errors, shared by the interceptor (locks of `@WithLock` routes) and
 * `RedlockExceptionFilter` (locks taken by hand): 409 with `Retry-After` when another owner holds
 * the lock, 503 when too few masters answered or the lock was lost midway. Undefined otherwise.
 */
export function lockHttpException(error: RedlockError): HttpException | undefined {
  if (error instanceof LockHeldError) return LockConflictException.fromError(error);
  if (error instanceof QuorumUnreachableError) return LockUnavailableException.fromError(error);
  if (error instanceof LockLostError) return LockUnavailableException.fromLost(error);
  return undefined;
}

/**
 * Sets `Retry-After` through the HTTP adapter, so Express and Fastify both get it: on a 409, and
 * on a 503 whose masters are in restart quarantine (they vote again at a known time).
 */
export function setRetryAfter(exception: HttpException, response: unknown, adapterHost?: HttpAdapterHost): void {
  const seconds = exception instanceof LockConflictException || exception instanceof LockUnavailableException ? exception.retryAfterSeconds : undefined;
  if (seconds === undefined) return;
  const value = String(seconds);
  const adapter = adapterHost?.httpAdapter;
  if (adapter) adapter.setHeader(response, 'Retry-After', value);
  else (response as { setHeader?: (name: string, value: string) => void }).setHeader?.('Retry-After', value);
}
