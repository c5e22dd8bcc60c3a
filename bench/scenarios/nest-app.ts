import 'reflect-metadata';
import { Controller, Get, Module, Param, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Redis } from 'ioredis';
import { RedlockModule, RedlockService, WithLock } from '../../lib/index.js';

/**
 * Two routes doing the same locked work, one through @WithLock, one through
 * RedlockService.using written by hand: the difference is what the decorator costs.
 * The work is one `await` of a resolved promise: the lock path itself is what is measured.
 */
export const TTL_MS = 10_000;

const work = async (id: string) => ({ id });

@Controller()
class BenchController {
  constructor(private readonly redlock: RedlockService) {}

  @Get('decorated/:id')
  @WithLock('bench:{0}', TTL_MS)
  decorated(@Param('id') id: string) {
    return work(id);
  }

  @Get('by-hand/:id')
  byHand(@Param('id') id: string) {
    return this.redlock.using(`bench:${id}`, TTL_MS, () => work(id));
  }
}

/** Listens on a free loopback port; the clients stay ours (the module never closes given clients). */
export async function startApp(clients: Redis[]): Promise<{ app: INestApplication; port: number }> {
  @Module({ imports: [RedlockModule.forRoot({ nodes: clients })], controllers: [BenchController] })
  class BenchModule {}
  const app = await NestFactory.create(BenchModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { app, port: address.port };
}
