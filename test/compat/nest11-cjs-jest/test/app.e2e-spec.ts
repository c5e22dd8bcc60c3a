import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { RedlockService } from 'nestjs-redlock';
import { AppModule } from '../src/app.module';

describe('nestjs-redlock in a Nest 11 CommonJS app under Jest', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    // Concurrent requests must reach one server that is already listening.
    await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
  });

  it('injects the RedlockService class this test imports (one copy of the package)', () => {
    expect(app.get(RedlockService)).toBeInstanceOf(RedlockService);
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
