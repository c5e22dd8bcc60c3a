import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Controller, Get, Param } from '@nestjs/common';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LockConflictException, LockHeldError, lockErrorPayload, RedlockModule, RedlockService, WithLock } from '../../lib/index.js';
import { lockGraphQLError } from '../../lib/graphql/index.js';
import { lockRpcException } from '../../lib/microservices/index.js';
import { lockWsException } from '../../lib/websockets/index.js';
import { InMemoryRedlock, RedlockTestingModule } from '../../lib/testing/index.js';
import { HoldTimes } from '../../lib/hold-times.js';
import { setRetryAfterEstimate } from '../../lib/errors/retry-after.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, fleetOptions, urlOf } from './nest-helpers.js';

/**
 * Retry-After on a 409 is an estimate of when the lock will be free, from how long the decorated
 * method has held its lock recently (HoldTimes), at most the holder's remaining ttl, at least 1 s;
 * the RPC, websocket and GraphQL payloads carry the same value. The computations are checked on
 * given durations and a clock the test moves, so nothing here depends on the machine's speed but
 * the last test, which is the issue's own check on real masters.
 */

describe('HoldTimes', () => {
  it('starts from the first hold and moves a quarter of the way to each next one', () => {
    const holds = new HoldTimes();
    expect(holds.estimateMs).toBeUndefined();
    holds.record(400);
    expect(holds.estimateMs).toBe(400);
    holds.record(800);
    expect(holds.estimateMs).toBe(500);
    holds.record(4_500);
    expect(holds.estimateMs).toBe(1_500);
  });

  it('answers max(1 s, min(estimate, remaining ttl)), and the remaining ttl before any hold', () => {
    const holds = new HoldTimes();
    expect(holds.retryAfterMs(9_000)).toBe(9_000);
    expect(holds.retryAfterMs(300)).toBe(1_000);
    expect(holds.retryAfterMs(undefined)).toBeUndefined();
    holds.record(500);
    expect(holds.retryAfterMs(9_000)).toBe(1_000);
    expect(holds.retryAfterMs(undefined)).toBe(1_000);
    holds.record(6_500); // estimate 2 000
    expect(holds.retryAfterMs(9_000)).toBe(2_000);
    expect(holds.retryAfterMs(1_200)).toBe(1_200);
    expect(holds.retryAfterMs(400)).toBe(1_000);
  });

  it('gives the estimate to the 409 and to the RPC, websocket and GraphQL payloads alike', () => {
    const error = new LockHeldError(['order:1'], ['127.0.0.1:1'], 1, 10_000);
    expect(LockConflictException.fromError(error).retryAfterSeconds).toBe(10);
    expect(lockErrorPayload(error)?.retryAfterMs).toBe(10_000);
    setRetryAfterEstimate(error, 1_400);
    expect(LockConflictException.fromError(error).retryAfterSeconds).toBe(2);
    expect(lockErrorPayload(error)?.retryAfterMs).toBe(1_400);
    expect((lockRpcException(error)!.getError() as { retryAfterMs: number }).retryAfterMs).toBe(1_400);
    expect((lockWsException(error)!.getError() as { retryAfterMs: number }).retryAfterMs).toBe(1_400);
    expect(lockGraphQLError(error)!.extensions.retryAfterMs).toBe(1_400);
    // The core error keeps its fact: the holder's remaining ttl.
    expect(error.retryAfterMs).toBe(10_000);
  });
});

/** The clock every lock and hold is measured on, moved by the handlers below. */
let now = 1_000_000;
const holdFor = { ms: 0 };

@Controller('orders')
class OrdersController {
  @Get(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  pay(@Param('id') id: string) {
    now += holdFor.ms;
    return { id };
  }
}

describe('the 409 of a @WithLock route (in-memory engine, a clock the test moves)', () => {
  afterEach(async () => {
    vi.restoreAllMocks();
    await closeAll();
  });

  it('says when the lock is likely free from how long the route held it recently', async () => {
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const app = await createApp({ imports: [RedlockTestingModule.forRoot()], controllers: [OrdersController] }, { listen: true });
    const engine = app.get(InMemoryRedlock);
    const url = urlOf(app);

    // No hold yet: the holder's remaining ttl, as before.
    engine.holdElsewhere('order:1', { ttlMs: 30_000 });
    expect((await request(url).get('/orders/1/pay').expect(409)).headers['retry-after']).toBe('30');

    holdFor.ms = 500;
    for (let call = 0; call < 3; call++) await request(url).get('/orders/2/pay').expect(200);
    expect((await request(url).get('/orders/1/pay').expect(409)).headers['retry-after']).toBe('1');

    // Holds of 4.5 s move the estimate up (500 → 1 500 → 2 250); never past the holder's remaining ttl.
    holdFor.ms = 4_500;
    await request(url).get('/orders/2/pay').expect(200);
    expect((await request(url).get('/orders/1/pay').expect(409)).headers['retry-after']).toBe('2');
    await request(url).get('/orders/2/pay').expect(200);
    expect((await request(url).get('/orders/1/pay').expect(409)).headers['retry-after']).toBe('3');
    engine.holdElsewhere('order:3', { ttlMs: 1_800 });
    expect((await request(url).get('/orders/3/pay').expect(409)).headers['retry-after']).toBe('2');
  });
});

let fleet: RedisFleet;

@Controller('slow')
class SlowController {
  @Get(':id')
  @WithLock('slow:{0}', { onLocked: 'fail' })
  async run(@Param('id') id: string) {
    await sleep(500);
    return { id };
  }
}

describe('the 409 of a @WithLock route on real masters', () => {
  beforeAll(async () => {
    fleet = await RedisFleet.start(3);
  });
  afterAll(async () => {
    await closeAll();
    await fleet?.stopAll();
  });

  it('after a few calls that hold for 0.5 s, carries a Retry-After of 1-2 s, not the holder\'s 10 s ttl', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))], controllers: [SlowController] }, { listen: true });
    const url = urlOf(app);
    for (let call = 0; call < 3; call++) await request(url).get(`/slow/${call}`).expect(200);
    const other = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))] });
    const lock = await other.get(RedlockService).acquire('slow:9', 10_000);
    try {
      const refused = await request(url).get('/slow/9').expect(409);
      expect(['1', '2']).toContain(refused.headers['retry-after']);
    } finally {
      await lock.release();
    }
  });
});
