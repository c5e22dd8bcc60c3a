import { INestApplication } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { RedlockService } from 'nestjs-redlock';
import { FixtureModule } from '../src/fixture.module';

// The README's quick start against the real masters test/compat/run.mjs starts (REDLOCK_NODES).
describe('the README quick start in a Nest 11 CommonJS app under Jest', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [FixtureModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    // The masters started shortly before: the first deploy's pause, which the README announces.
    await sleep((await app.get(RedlockService).redlock.checkMasters()).availableInMs ?? 0);
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  it('pays an order once at a time: of two concurrent payments, one gets 409 with Retry-After', async () => {
    const id = randomUUID();
    const server = app.getHttpServer();
    const [first, second] = await Promise.all([
      request(server).post(`/orders/${id}/pay`),
      request(server).post(`/orders/${id}/pay`),
    ]);
    expect([first.status, second.status].sort()).toEqual([201, 409]);
    const [won, refused] = first.status === 201 ? [first, second] : [second, first];
    expect(won.body).toEqual({ id, paid: true });
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
  });

  it('merges two orders under one lock taken with RedlockService', async () => {
    const res = await request(app.getHttpServer()).post('/orders/1/merge-into/2');
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ merged: '1', into: '2' });
  });

  it('reports the masters in the health check', async () => {
    const res = await request(app.getHttpServer()).get('/health');
    expect(res.status).toBe(200);
    expect(res.body.info.redlock.status).toBe('up');
  });

  it('schedules the job on every replica (the lock picks the one that runs it)', () => {
    const scheduler = app.get(SchedulerRegistry);
    expect(scheduler.getIntervals()).toHaveLength(1);
    expect(scheduler.getCronJobs().size).toBe(1);
  });
});
