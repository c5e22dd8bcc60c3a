import 'reflect-metadata';
import { createRequire } from 'node:module';
import { Controller, Param, Post } from '@nestjs/common';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { RedlockModule, WithLock } from '../../lib/index.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, fleetOptions, urlOf } from './nest-helpers.js';

// The deploy that switches a Nest app off node-redlock: the new version's @WithLock handlers run
// beside the old version's node-redlock calls, on the same masters and keys
// (`keyFormat: 'node-redlock'`), and the two exclude each other.

interface NodeRedlockLock {
  readonly value: string;
  release(): Promise<unknown>;
}
type NodeRedlock = new (clients: Redis[], settings?: { retryCount?: number }) => {
  acquire(resources: string[], duration: number): Promise<NodeRedlockLock>;
};
/** node-redlock itself (redlock 5.0.0-beta.2), as its CommonJS users load it. */
const OldRedlock = (createRequire(import.meta.url)('redlock') as { default: NodeRedlock }).default;

let fleet: RedisFleet;
let clients: Redis[];
/** Set by the handler while it runs: what node-redlock got when it asked for the same order. */
let seenDuringHandler: { bareKeyValues: (string | null)[]; oldRedlock: 'refused' | 'granted' } | undefined;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  clients = await connectMasters(fleet.urls());
});

afterEach(async () => {
  await closeAll();
});

afterAll(async () => {
  disconnectAll(clients);
  await fleet?.stopAll();
});

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @WithLock('order:{0}', { ttlMs: 10_000, onLocked: 'fail' })
  async pay(@Param('id') id: string) {
    const bareKeyValues = await Promise.all(clients.map((client) => client.get(`order:${id}`)));
    const oldRedlock = await new OldRedlock(clients, { retryCount: 0 }).acquire([`order:${id}`], 5_000).then(
      async (lock) => {
        await lock.release();
        return 'granted' as const;
      },
      () => 'refused' as const,
    );
    seenDuringHandler = { bareKeyValues, oldRedlock };
    return { paid: id };
  }
}

async function app() {
  return createApp(
    { imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), keyFormat: 'node-redlock' })], controllers: [OrdersController] },
    { listen: true },
  );
}

it("a @WithLock handler holds the bare key node-redlock uses, and node-redlock is refused meanwhile", async () => {
  const server = await app();
  await request(urlOf(server)).post('/orders/42/pay').expect(201);
  expect(seenDuringHandler?.oldRedlock).toBe('refused');
  expect(seenDuringHandler?.bareKeyValues.filter((value) => value !== null).length).toBeGreaterThanOrEqual(2);
  // Released after the handler: node-redlock gets it now.
  const lock = await new OldRedlock(clients, { retryCount: 0 }).acquire(['order:42'], 5_000);
  expect(await clients[0]!.get('order:42')).toBe(lock.value);
  // And while node-redlock holds it, the handler answers 409.
  await request(urlOf(server)).post('/orders/42/pay').expect(409);
  await lock.release();
});
