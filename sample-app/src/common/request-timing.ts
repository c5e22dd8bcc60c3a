import { Injectable, type NestMiddleware } from '@nestjs/common';
import { performance } from 'node:perf_hooks';

/** The bits of Express' response these helpers use (no @types/express needed). */
export interface TimedResponse {
  locals: Record<string, unknown>;
  setHeader(name: string, value: string): unknown;
}

/** Response header with the time from the request's arrival to its handler starting. */
export const LOCK_WAIT_HEADER = 'X-Lock-Wait-Ms';

/**
 * Notes when a request arrived. Middleware runs before interceptors, so before @WithLock's
 * interceptor starts waiting for the lock.
 */
@Injectable()
export class RequestTimingMiddleware implements NestMiddleware {
  use(_req: unknown, res: TimedResponse, next: () => void): void {
    res.locals.receivedAt = performance.now();
    next();
  }
}

/**
 * Called first thing in a handler: on a @WithLock route the handler starts once the lock is
 * held, so this is (almost all) the time spent waiting for the lock. The header is set before
 * the handler can fail, so error answers carry it too.
 */
export function reportLockWait(res: TimedResponse): void {
  const receivedAt = res.locals.receivedAt;
  if (typeof receivedAt === 'number') res.setHeader(LOCK_WAIT_HEADER, (performance.now() - receivedAt).toFixed(1));
}
