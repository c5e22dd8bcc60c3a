import 'reflect-metadata';
import { Body, Controller, Get, Post } from '@nestjs/common';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, RedlockService, WithLock } from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, directClients, fleetOptions, urlOf } from './nest-helpers.js';

// Requests a hostile or careless client can send: none may crash the app, leave keys behind, or
// read a master's password out of a response.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
afterEach(closeAll);
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
});

@Controller('batch')
class BatchController {
  constructor(private readonly redlock: RedlockService) {}

  // One lock over every item the body names: the body decides how many resources there are.
  @Post()
  @WithLock((items: number[]) => items.map((item) => `item:${item}`), 10_000)
  lockAll(@Body() items: number[]) {
    return { locked: items.length };
  }

  // A handler that returns the lock it took, as a careless one might.
  @Get('lock')
  async lock() {
    const lock = await this.redlock.acquire('returned', 5_000);
    try {
      return { lock };
    } finally {
      await lock.release();
    }
  }
}

describe('hostile requests', () => {
  it('a body naming 16,000 resources gets an error answer, the app keeps serving, and no key is left', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))], controllers: [BatchController] }, { listen: true });
    // About 90 KB of JSON, under the body parser's limit.
    const items = Array.from({ length: 16_000 }, (_, i) => i);
    const answer = await request(urlOf(app)).post('/batch').send(items);
    expect(answer.status).toBe(500);
    const masters = directClients(fleet);
    expect(await Promise.all(masters.map((master) => master.dbsize()))).toEqual([0, 0, 0]);
    // Still alive, and an ordinary request works.
    await request(urlOf(app)).post('/batch').send([1, 2]).expect(201, { locked: 2 });
  });

  it('a returned lock shows resources, expiry and fence only: no password, no token', async () => {
    const password = 'hostile-probe-pw';
    await Promise.all(directClients(fleet).map((master) => master.config('SET', 'requirepass', password)));
    try {
      const nodes = fleet.nodes.map((node) => `redis://:${password}@127.0.0.1:${node.port}`);
      const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), nodes })], controllers: [BatchController] }, { listen: true });
      const answer = await request(urlOf(app)).get('/batch/lock').expect(200);
      expect(answer.text).not.toContain(password);
      expect(Object.keys(answer.body.lock).sort()).toEqual(['remainingMs', 'resources', 'validUntil']);
      expect(answer.body.lock.resources).toEqual(['returned']);
    } finally {
      await Promise.all(
        fleet.nodes.map(async (node) => {
          const { Redis } = await import('ioredis');
          const client = new Redis({ port: node.port, password, lazyConnect: true });
          await client.connect();
          await client.config('SET', 'requirepass', '');
          client.disconnect();
        }),
      );
    }
  });
});
