import 'reflect-metadata';
import { Controller, type DynamicModule, type INestApplication, Injectable, Module, Param, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedlockModule, RedlockService, WithLock } from '../../lib/index.js';
import { InMemoryRedlock, RedlockTestingModule } from '../../lib/testing/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, deferred, urlOf } from './nest-helpers.js';

// The README's examples, as real code run against real masters (the testing example, in memory,
// as it says). Between the "README" markers the code is exactly what the README shows, except
// that it imports from '../../lib/index.js' and '../../lib/testing/index.js' instead of
// 'nestjs-redlock' and 'nestjs-redlock/testing', and ConfigModule / ConfigService are the
// stand-ins below (@nestjs/config is not a dependency of this repository).

/** Stand-in for @nestjs/config: same calls, backed by process.env. */
@Injectable()
class ConfigService {
  get<T = string>(key: string): T | undefined {
    return process.env[key] as T | undefined;
  }
  getOrThrow<T = string>(key: string): T {
    const value = this.get<T>(key);
    if (value === undefined) throw new Error(`missing configuration ${key}`);
    return value;
  }
}
@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {
  static forRoot(): DynamicModule {
    return { module: ConfigModule, global: true };
  }
}

/** The application's own service behind the README controller; the test controls when pay() finishes. */
const payments = { entered: deferred(), gate: deferred() };
@Injectable()
class OrdersService {
  async pay(id: string) {
    payments.entered.resolve();
    await payments.gate.promise;
    return { id, paid: true };
  }
}

// ---- README: decorator ---------------------------------------------------------------------
@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  // One payment per order at a time, across every instance of the app. A second request
  // meanwhile gets 409 Conflict with a Retry-After header instead of waiting.
  @Post(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  pay(@Param('id') id: string) {
    return this.orders.pay(id);
  }
}

// Not only controllers: any provider method. Waits up to 5 s for the lock, keeps it alive
// while issue() runs, and releases it afterwards, also when issue() throws.
@Injectable()
export class InvoiceService {
  @WithLock('invoice:{0.customerId}', { waitTimeoutMs: 5_000 })
  async issue(order: { customerId: string; total: number }) {
    return { customer: order.customerId, amount: order.total };
  }
}
// ---- end README ----------------------------------------------------------------------------

// ---- README: service -----------------------------------------------------------------------
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
// ---- end README ----------------------------------------------------------------------------

// ---- README: forRootAsync ------------------------------------------------------------------
@Module({
  imports: [
    ConfigModule.forRoot(),
    RedlockModule.forRootAsync({
      isGlobal: true,
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        // Independent masters: REDLOCK_NODES=redis://:pw@redis-a:6379,redis://:pw@redis-b:6379,...
        nodes: config.getOrThrow<string>('REDLOCK_NODES').split(','),
        defaultTtlMs: Number(config.get('REDLOCK_TTL_MS') ?? 10_000),
      }),
    }),
  ],
  controllers: [OrdersController],
  providers: [OrdersService, InvoiceService, ReportService],
})
export class AppModule {}
// ---- end README ----------------------------------------------------------------------------

// ---- README: testing -----------------------------------------------------------------------
describe('OrdersController', () => {
  let app: INestApplication;
  let locks: InMemoryRedlock;

  beforeEach(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot()], // instead of RedlockModule.forRoot({ nodes: [...] })
      controllers: [OrdersController],
      providers: [OrdersService],
    }).compile();
    app = await moduleRef.createNestApplication().init();
    locks = app.get(InMemoryRedlock);
  });
  afterEach(() => app.close());

  it('answers 409 while another replica pays the same order', async () => {
    locks.holdElsewhere('order:17', { ttlMs: 30_000 });
    const res = await request(app.getHttpServer()).post('/orders/17/pay');
    expect(res.status).toBe(409);
    expect(res.headers['retry-after']).toBe('30');
  });

  it('answers 503 when the lock servers cannot be reached', async () => {
    locks.makeQuorumUnreachable();
    await request(app.getHttpServer()).post('/orders/17/pay').expect(503);
  });

  it('aborts work whose lock is lost', async () => {
    const aborted = await app.get(RedlockService).using('report:2026-01-01', async (signal) => {
      locks.loseLock('report:2026-01-01');
      return signal.aborted;
    });
    expect(aborted).toBe(true);
  });
});
// ---- end README ----------------------------------------------------------------------------

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  process.env.REDLOCK_NODES = fleet.urls().join(',');
  // Short, so that the restart quarantine (left at its default here, as in the README) ends
  // soon after the fleet's fresh servers start.
  process.env.REDLOCK_TTL_MS = '1000';
});
afterEach(closeAll);
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
  delete process.env.REDLOCK_NODES;
  delete process.env.REDLOCK_TTL_MS;
});

describe('README examples', () => {
  it('run as documented', async () => {
    const app = await createApp({ imports: [AppModule] }, { listen: true });
    const reports = app.get(ReportService);

    // Waits out the restart quarantine of the fresh masters, as any wait-policy lock would.
    expect(await reports.rebuild('2026-01-01')).toBe(1);
    expect(await reports.rebuildIfIdle('2026-01-01')).toBe(1);
    const held = await app.get(RedlockService).acquire('report:2026-01-01');
    expect(await reports.rebuildIfIdle('2026-01-01')).toBe('busy');
    await held.release();

    const url = urlOf(app);
    const first = request(url).post('/orders/17/pay').then((response) => response);
    await payments.entered.promise;
    const second = await request(url).post('/orders/17/pay');
    expect(second.status).toBe(409);
    expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(second.body.resources).toEqual(['order:17']);
    payments.gate.resolve();
    expect((await first).status).toBe(201);
    expect((await first).body).toEqual({ id: '17', paid: true });

    const invoices = app.get(InvoiceService);
    const order = { customerId: 'c-1', total: 30 };
    expect(await Promise.all([invoices.issue(order), invoices.issue(order)])).toEqual([
      { customer: 'c-1', amount: 30 },
      { customer: 'c-1', amount: 30 },
    ]);
  });
});
