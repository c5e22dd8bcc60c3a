import 'reflect-metadata';
import { Body, Controller, Injectable, Post, Query } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { WsAdapter } from '@nestjs/platform-ws';
import { Test } from '@nestjs/testing';
import { SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockConfigError, RedlockModule, WithLock } from '../../../lib/index.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { closeAll, createApp, directClients, fleetOptions, urlOf } from '../nest-helpers.js';

// Whose mistake is a key that cannot be formed? An argument the client sent (a JSON object
// where the key reads a scalar, a missing parameter) is the client's: 400, naming the
// placeholder. A template naming an argument the handler never receives is the developer's:
// the app does not start. (The other transports' answers are in their own tests.)

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
afterEach(closeAll);
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
});

@Injectable()
class Ledger {
  @WithLock('account:{0}')
  async post(account: unknown) {
    return { posted: account };
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @WithLock('customer:{0.id}')
  place(@Body() _order: { id?: unknown }) {
    return { placed: true };
  }

  @Post('by-query')
  @WithLock('q:{0}')
  byQuery(@Query('id') _id?: string) {
    return { placed: true };
  }

  @Post('computed')
  @WithLock((order: { lines: string[] }) => order.lines.map((line) => `line:${line}`))
  computed(@Body() _order: { lines: string[] }) {
    return { placed: true };
  }

  /** The body reaches a provider method whose key it cannot form: a bug of this handler, not of the client. */
  @Post('ledger')
  ledgerPost(@Body() body: { account: unknown }) {
    return this.ledger.post(body.account);
  }
}

async function ordersUrl() {
  return urlOf(await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))], controllers: [OrdersController], providers: [Ledger] }, { listen: true }));
}

describe('a route argument that cannot form the key', () => {
  it('answers 400 naming the placeholder, not the class behind it, and locks nothing', async () => {
    const url = await ordersUrl();
    const masters = directClients(fleet);
    const answer = await request(url).post('/orders').send({ id: { $gt: '' } });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message:
        'invalid {0.id} in lock key "customer:{0.id}": an object (expected a string, a number, a bigint, a boolean or an object with its own toString())',
      placeholder: '{0.id}',
    });
    expect(answer.text).not.toContain('OrdersController');
    expect((await request(url).post('/orders').send({})).body.message).toMatch(/^invalid \{0\.id\} in lock key "customer:\{0\.id\}": undefined/);
    expect((await request(url).post('/orders/by-query')).body).toMatchObject({ statusCode: 400, placeholder: '{0}' });
    expect(await Promise.all(masters.map((master) => master.dbsize()))).toEqual([0, 0, 0]);
    await request(url).post('/orders').send({ id: 7 }).expect(201, { placed: true });
  });

  it('stays a 500 where the mistake is the code: a key function that fails, a provider called with a bad argument', async () => {
    const url = await ordersUrl();
    expect((await request(url).post('/orders/computed').send({})).status).toBe(500);
    expect((await request(url).post('/orders/ledger').send({ account: { id: 1 } })).status).toBe(500);
    await request(url).post('/orders/ledger').send({ account: 'a-1' }).expect(201, { posted: 'a-1' });
  });
});

@Controller()
class UndecoratedMessages {
  /** Without parameter decorators a message handler receives the payload alone. */
  @MessagePattern('pay')
  @WithLock('order:{1}')
  pay(_payload: unknown, _context: unknown) {}
}

@WebSocketGateway()
class UndecoratedGateway {
  /** Without parameter decorators a gateway handler receives socket, body and ack. */
  @SubscribeMessage('pay')
  @WithLock('order:{3}')
  pay(_socket: unknown, _body: unknown, _ack: unknown, _extra: unknown) {}
}

describe('a key reading an argument the handler never receives', () => {
  it.each([
    ['a message handler', { controllers: [UndecoratedMessages] }, /^@WithLock on UndecoratedMessages\.pay: the lock key reads argument 1, which has no parameter decorator \(@Payload, @Ctx, \.\.\.\), so the handler never receives it$/],
    ['a gateway handler', { providers: [UndecoratedGateway] }, /^@WithLock on UndecoratedGateway\.pay: the lock key reads argument 3, which has no parameter decorator \(@MessageBody, @ConnectedSocket, \.\.\.\)/],
  ])('on %s stops the app at bootstrap', async (_label, metadata, message) => {
    const moduleRef = await Test.createTestingModule({ imports: [RedlockModule.forRoot(fleetOptions(fleet))], ...metadata }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    app.useWebSocketAdapter(new WsAdapter(app));
    const error = await app.init().catch((e: unknown) => e);
    await app.close();
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(message);
  });
});
