import { Controller, Injectable, Module, Param, Post } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedlockModule, RedlockService, WithLock } from '../../lib/index.js';

// The README's quick start and the services of docs/nest.md, for readme-examples.test.ts. Between
// the markers the code is exactly what the markdown shows, without its import lines (the imports
// above stand for them: '../../lib/index.js' is 'nestjs-redlock'). AppModule reads REDLOCK_NODES
// when this file is evaluated, as the README's does at start: import it only once that is set.

// ---- README: src/orders.service.ts ---------------------------------------------------------
@Injectable()
export class OrdersService {
  constructor(private readonly redlock: RedlockService) {}

  // Runs under the controller's lock on order:<id>.
  async pay(id: string) {
    await sleep(500); // stands for the call to the payment provider
    return { id, paid: true };
  }

  // Both orders at once (all or nothing), waiting for them if need be. The lock is extended
  // while the routine runs and released afterwards, also when it throws.
  merge(from: string, into: string) {
    return this.redlock.using([`order:${from}`, `order:${into}`], async (signal) => {
      signal.throwIfAborted(); // the signal fires if the lock is lost
      return { merged: from, into };
    });
  }
}
// ---- end README ----------------------------------------------------------------------------

// ---- README: src/orders.controller.ts ------------------------------------------------------
@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  // One payment per order at a time, across every replica. A second request meanwhile gets
  // 409 Conflict with a Retry-After header instead of waiting.
  @Post(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  pay(@Param('id') id: string) {
    return this.orders.pay(id);
  }

  @Post(':id/merge-into/:other')
  merge(@Param('id') id: string, @Param('other') other: string) {
    return this.orders.merge(id, other);
  }
}
// ---- end README ----------------------------------------------------------------------------

// ---- README: src/app.module.ts -------------------------------------------------------------
@Module({
  imports: [
    RedlockModule.forRoot({
      isGlobal: true,
      // Independent masters, comma-separated: REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379
      nodes: (process.env.REDLOCK_NODES ?? 'redis://127.0.0.1:6379').split(','),
    }),
  ],
  controllers: [OrdersController],
  providers: [OrdersService],
})
export class AppModule {}
// ---- end README ----------------------------------------------------------------------------

// ---- docs/nest.md: src/invoice.service.ts --------------------------------------------------
// Not only controllers: any provider method. Waits up to 5 s for the lock, keeps it alive
// while issue() runs, and releases it afterwards, also when issue() throws.
@Injectable()
export class InvoiceService {
  @WithLock('invoice:{0.customerId}', { waitTimeoutMs: 5_000 })
  async issue(order: { customerId: string; total: number }) {
    return { customer: order.customerId, amount: order.total };
  }
}
// ---- end docs ------------------------------------------------------------------------------

// ---- docs/nest.md: src/report.service.ts ---------------------------------------------------
@Injectable()
export class ReportService {
  constructor(private readonly redlock: RedlockService) {}

  // Held, and extended while the routine runs; released afterwards whatever happens.
  rebuild(day: string) {
    return this.redlock.using(`report:${day}`, async (signal) => {
      const rows = await this.load(day, signal); // the signal aborts if the lock is lost
      return rows.length;
    });
  }

  // By hand: tryAcquire gives null at once when someone else holds the lock.
  async rebuildIfIdle(day: string) {
    const lock = await this.redlock.tryAcquire(`report:${day}`);
    if (!lock) return 'busy';
    try {
      return (await this.load(day, lock.signal)).length;
    } finally {
      await lock.release();
    }
  }

  private async load(day: string, signal: AbortSignal): Promise<string[]> {
    signal.throwIfAborted();
    return [day];
  }
}
// ---- end docs ------------------------------------------------------------------------------
