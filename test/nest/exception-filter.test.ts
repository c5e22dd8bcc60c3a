import 'reflect-metadata';
import { Controller, Param, Post } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock, RedlockExceptionFilter, RedlockModule, RedlockService, WithLock } from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, fleetOptions, urlOf } from './nest-helpers.js';

let fleet: RedisFleet;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  await closeAll();
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});

afterAll(async () => {
  await fleet?.stopAll();
});

@Controller('manual')
class ManualController {
  constructor(private readonly redlock: RedlockService) {}

  // A lock taken by hand: without the filter a LockHeldError would be a 500.
  @Post(':id')
  async touch(@Param('id') id: string) {
    const lock = await this.redlock.tryAcquire(`manual:${id}`, 5_000);
    if (!lock) return this.redlock.acquire(`manual:${id}`, 5_000, { retryCount: 0 });
    await lock.release();
    return { ok: true };
  }

  @Post(':id/hold')
  async hold(@Param('id') id: string) {
    await this.redlock.acquire(`manual:${id}`, 5_000);
    return { held: true };
  }
}

async function app() {
  return createApp(
    {
      imports: [RedlockModule.forRoot(fleetOptions(fleet))],
      controllers: [ManualController],
      providers: [{ provide: APP_FILTER, useClass: RedlockExceptionFilter }],
    },
    { listen: true },
  );
}

describe('RedlockExceptionFilter', () => {
  it('answers a lock held elsewhere, taken by hand, with 409 and Retry-After, never the token', async () => {
    const server = await app();
    await request(urlOf(server)).post('/manual/1/hold').expect(201);
    const response = await request(urlOf(server)).post('/manual/1').expect(409);
    expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(response.body).toMatchObject({ statusCode: 409, resources: ['manual:1'] });
    const held = [...server.get(Redlock).heldLocks][0]!;
    expect(JSON.stringify(response.body)).not.toContain(held.token);
  });

  it('answers a quorum that cannot be reached with 503', async () => {
    const server = await app();
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    const response = await request(urlOf(server)).post('/manual/2').expect(503);
    expect(response.body).toMatchObject({ statusCode: 503, resources: ['manual:2'] });
    expect(JSON.stringify(response.body)).not.toMatch(/127\.0\.0\.1/);
  });
});

@Controller('ttl')
class TtlController {
  @Post()
  @WithLock('long-job', 45_000)
  run() {
    return { ok: true };
  }
}

describe('restart quarantine window', () => {
  it('covers the default ttl and every @WithLock ttl before the first lock is taken', async () => {
    const server = await createApp({
      imports: [RedlockModule.forRoot({ nodes: fleet.urls(), defaultTtlMs: 30_000 })],
      controllers: [TtlController],
    });
    const redlock = server.get(Redlock);
    // The masters started seconds ago: with a 45 s window, even a 1 s lock must not count them.
    const error = await redlock.acquire('short', 1_000, { waitTimeoutMs: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    expect((error as QuorumUnreachableError).nodes.map((node) => node.status)).toEqual(['quarantined', 'quarantined', 'quarantined']);
    // Longer than the 30 s default ttl could give: the 45 s @WithLock ttl counts too.
    expect((error as QuorumUnreachableError).retryAfterMs).toBeGreaterThan(35_000);
  });
});
