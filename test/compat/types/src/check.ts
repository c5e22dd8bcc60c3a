// What a user writes against the package's types. The @ts-expect-error lines prove the types
// are real: were a module resolved to `any`, they would be unused and fail the check.
import { Controller, Injectable, Module, Param, Post } from '@nestjs/common';
import {
  LockConflictException,
  LockHeldError as RootLockHeldError,
  RedlockModule,
  RedlockService,
  WithLock,
  type RedlockModuleOptions,
} from 'nestjs-redlock';
import {
  Lock,
  LockHeldError,
  QuorumUnreachableError,
  Redlock,
  type RedlockOptions,
  type ReleaseResult,
} from 'nestjs-redlock/core';
import NodeRedlock, { ExecutionError, type ExecutionStats, type Settings } from 'nestjs-redlock/node-redlock';
import type { Redis } from 'ioredis';

const options: RedlockModuleOptions = { nodes: ['redis://127.0.0.1:1'], restartQuarantineMs: false };
// @ts-expect-error nodes is required
const missingNodes: RedlockModuleOptions = { defaultTtlMs: 1_000 };

@Injectable()
export class ReportService {
  constructor(private readonly redlock: RedlockService) {}

  rebuild(day: string): Promise<number> {
    return this.redlock.using(`report:${day}`, async (signal: AbortSignal, lock: Lock) => {
      signal.throwIfAborted();
      return lock.resources.length;
    });
  }

  async rebuildIfIdle(day: string): Promise<ReleaseResult | 'busy'> {
    const lock: Lock | null = await this.redlock.tryAcquire(`report:${day}`);
    if (!lock) return 'busy';
    return lock.release();
  }
}

@Controller('orders')
export class OrdersController {
  @Post(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  pay(@Param('id') id: string) {
    return { id };
  }

  // @ts-expect-error onLocked is 'wait', 'fail' or 'skip'
  @WithLock('order:{0}', { onLocked: 'sometimes' })
  refund(@Param('id') id: string) {
    return { id };
  }
}

@Module({ imports: [RedlockModule.forRoot(options)], providers: [ReportService], controllers: [OrdersController] })
export class AppModule {}

export function engine(clients: Redis[], engineOptions: RedlockOptions): Redlock {
  return new Redlock(clients, engineOptions);
}

export function describeFailure(error: unknown): string {
  // The root entry and /core must name the same class, or instanceof would be a lie.
  const sameClass: typeof LockHeldError = RootLockHeldError;
  if (error instanceof sameClass) return `held: ${error.resources.join(',')} retry after ${error.retryAfterMs ?? 0} ms`;
  if (error instanceof QuorumUnreachableError) return 'too few masters';
  if (error instanceof LockConflictException) return `409 after ${error.retryAfterSeconds} s`;
  return 'unknown';
}

/** node-redlock's code, switched by its import alone. */
export async function pay(clients: Redis[], order: string): Promise<number> {
  const settings: Partial<Settings> = { retryCount: 3, retryDelay: 100 };
  const redlock = new NodeRedlock(clients, settings);
  try {
    return await redlock.using([`order:${order}`], 5_000, async (signal) => (signal.aborted ? 0 : 1));
  } catch (error) {
    if (!(error instanceof ExecutionError)) throw error;
    const rounds: ExecutionStats[] = await Promise.all(error.attempts);
    return -rounds.length;
  }
}

/** `await using`: a held lock, an entered session and a won leadership are AsyncDisposable (TypeScript 5.2+). */
export async function reserve(redlock: Redlock, sku: string): Promise<number> {
  await using lock = await redlock.acquire(`stock:${sku}`, 10_000);
  await using session = await redlock.enter(`shelf:${sku}`, 10_000);
  await using leadership = await redlock.election('restock').campaign('pod-a');
  return lock.remainingMs() + session.lock.remainingMs() + leadership.term;
}

// @ts-expect-error a duration is a number of ms
void new NodeRedlock([]).acquire(['r'], '5s');

export { missingNodes };
