import 'reflect-metadata';
import { type INestApplication, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedlockService } from '../../lib/index.js';
import { InMemoryRedlock, RedlockTestingModule } from '../../lib/testing/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, deferred, urlOf } from './nest-helpers.js';

// The README's examples, as real code run against real masters (the testing example, in memory,
// as it says). The app is readme-app.ts; between the "README" markers below the code is exactly
// what the README shows, without its import lines ('../../lib/testing/index.js' stands for
// 'nestjs-redlock/testing'). docs-snippets.test.ts compiles every block with its imports.

// Before the app's file is evaluated: its AppModule reads the masters from the environment then.
const fleet = await RedisFleet.start(3);
process.env.REDLOCK_NODES = fleet.urls().join(',');
const { AppModule, InvoiceService, OrdersController, OrdersService, ReportService } = await import('./readme-app.js');

// ---- README: src/orders.controller.spec.ts -------------------------------------------------
describe('OrdersController', () => {
  let app: INestApplication;
  let locks: InMemoryRedlock;

  beforeEach(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot({ isGlobal: true })], // instead of RedlockModule.forRoot(...)
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
    const aborted = await app.get(RedlockService).using('order:9', async (signal) => {
      locks.loseLock('order:9');
      return signal.aborted;
    });
    expect(aborted).toBe(true);
  });
});
// ---- end README ----------------------------------------------------------------------------

afterEach(closeAll);
afterAll(async () => {
  vi.restoreAllMocks();
  await closeAll();
  await fleet?.stopAll();
  delete process.env.REDLOCK_NODES;
});

describe('README quick start', () => {
  it('runs as documented on fresh masters: paused for the restart quarantine, then one payment per order at a time', async () => {
    // The test decides when a payment finishes, so that the second request surely meets the first.
    const payments = { entered: deferred(), gate: deferred() };
    const pay = OrdersService.prototype.pay;
    vi.spyOn(OrdersService.prototype, 'pay').mockImplementation(async function (this: InstanceType<typeof OrdersService>, id: string) {
      payments.entered.resolve();
      await payments.gate.promise;
      return pay.call(this, id);
    });
    @Module({ imports: [AppModule], providers: [InvoiceService, ReportService] })
    class TestedModule {}
    const app = await createApp({ imports: [TestedModule] }, { listen: true });
    const url = urlOf(app);

    // Fresh masters: the first deploy's pause, as the README says (503 with Retry-After).
    const redlock = app.get(RedlockService).redlock;
    const { availableInMs } = await redlock.checkMasters();
    expect(availableInMs).toBeGreaterThan(0);
    const paused = await request(url).post('/orders/1/pay');
    expect(paused.status).toBe(503);
    expect(Number(paused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    await sleep((await redlock.checkMasters()).availableInMs ?? 0);

    const first = request(url).post('/orders/17/pay').then((response) => response);
    await payments.entered.promise;
    const second = await request(url).post('/orders/17/pay');
    expect(second.status).toBe(409);
    expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(second.body.resources).toEqual(['order:17']);
    payments.gate.resolve();
    expect((await first).status).toBe(201);
    expect((await first).body).toEqual({ id: '17', paid: true });

    const merged = await request(url).post('/orders/17/merge-into/18');
    expect(merged.status).toBe(201);
    expect(merged.body).toEqual({ merged: '17', into: '18' });

    const reports = app.get(ReportService);
    expect(await reports.rebuild('2026-01-01')).toBe(1);
    expect(await reports.rebuildIfIdle('2026-01-01')).toBe(1);
    const held = await app.get(RedlockService).acquire('report:2026-01-01');
    expect(await reports.rebuildIfIdle('2026-01-01')).toBe('busy');
    await held.release();

    const invoices = app.get(InvoiceService);
    const order = { customerId: 'c-1', total: 30 };
    expect(await Promise.all([invoices.issue(order), invoices.issue(order)])).toEqual([
      { customer: 'c-1', amount: 30 },
      { customer: 'c-1', amount: 30 },
    ]);
  }, 60_000);
});
