import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as imported from 'nestjs-redlock';
import { AppModule } from '../src/app.module.js';

describe('nestjs-redlock in a Nest 12 ESM app under Vitest', () => {
  let app: INestApplication;

  beforeAll(async () => {
    app = await NestFactory.create(AppModule, { logger: false });
    // Concurrent requests must reach one server that is already listening.
    await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
  });

  it('gives one RedlockService class whether the package is imported or required', () => {
    // An ESM app can still load the package through require (a CommonJS dependency, or
    // createRequire): Nest resolves providers by class identity, so a second copy of the
    // class would be a different, unregistered provider.
    const required = createRequire(import.meta.url)('nestjs-redlock') as typeof imported;
    expect(required.RedlockService).toBe(imported.RedlockService);
    expect(required.LockHeldError).toBe(imported.LockHeldError);
    expect(app.get(required.RedlockService)).toBe(app.get(imported.RedlockService));
  });

  it('@WithLock: one of two concurrent payments runs, the other gets 409 with Retry-After', async () => {
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
    expect(refused.body.resources).toEqual([`order:${id}`]);

    // Released after the winner finished: the next payment goes through.
    const again = await request(server).post(`/orders/${id}/pay`);
    expect(again.status).toBe(201);
  });

  it('RedlockService.using: two concurrent rebuilds of one day run one after the other', async () => {
    const day = randomUUID();
    const server = app.getHttpServer();
    const [first, second] = await Promise.all([
      request(server).post(`/reports/${day}/rebuild`),
      request(server).post(`/reports/${day}/rebuild`),
    ]);
    for (const response of [first, second]) {
      expect(response.status).toBe(201);
      expect(response.body).toEqual({ day, overlapped: false, resources: [`report:${day}`] });
    }
  });
});
