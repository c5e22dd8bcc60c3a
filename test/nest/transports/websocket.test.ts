import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import { ConnectedSocket, MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { Test } from '@nestjs/testing';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { RedlockModule, RedlockService, WithLock } from '../../../lib/index.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { ConcurrencyProbe, deferred, fleetOptions, urlOf } from '../nest-helpers.js';

// @WithLock on handlers of a real websocket gateway (@nestjs/websockets on @nestjs/platform-ws),
// called by real `ws` clients: keys read the handler's parameters (@MessageBody('orderId'),
// @ConnectedSocket()), two replicas on the same masters exclude each other, and lock failures
// reach the client as the `exception` event of a WsException.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
const apps: INestApplication[] = [];
const sockets: WsClient[] = [];
afterEach(async () => {
  state.gate.resolve();
  for (const socket of sockets.splice(0)) socket.terminate();
  await Promise.allSettled(apps.splice(0).map((app) => app.close()));
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});
afterAll(async () => {
  await fleet?.stopAll();
});

const state = { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), ran: 0 };
beforeEach(() => Object.assign(state, { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), ran: 0 }));

@WebSocketGateway()
class PaymentsGateway {
  constructor(private readonly redlock: RedlockService) {}

  @SubscribeMessage('pay')
  @WithLock('order:{0}', 2_000)
  async pay(@MessageBody('orderId') orderId: string) {
    await state.probe.section(5);
    return { event: 'paid', data: orderId };
  }

  @SubscribeMessage('pay-unlocked')
  async payUnlocked(@MessageBody('orderId') orderId: string) {
    await state.probe.section(5);
    return { event: 'paid', data: orderId };
  }

  /** {1} is the second parameter, the body's customer, not the context's second argument (the whole body). */
  @SubscribeMessage('refund')
  @WithLock('customer:{1.id}', { ttlMs: 2_000, onLocked: 'fail' })
  refund(@ConnectedSocket() socket: { send?: unknown }, @MessageBody('customer') _customer: { id: string }) {
    return { event: 'refunded', data: { lock: this.redlock.currentLock()?.resources, socket: typeof socket?.send === 'function' } };
  }

  @SubscribeMessage('hold')
  @WithLock('order:{0}', 2_000)
  async hold(@MessageBody('orderId') _orderId: string) {
    state.entered.resolve();
    await state.gate.promise;
    return { event: 'released', data: true };
  }

  @SubscribeMessage('pay-now')
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'fail' })
  payNow(@MessageBody('orderId') orderId: string) {
    return { event: 'paid', data: orderId };
  }

  @SubscribeMessage('pay-if-idle')
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'skip' })
  payIfIdle(@MessageBody('orderId') orderId: string) {
    state.ran++;
    return { event: 'paid', data: orderId };
  }

  /** Without parameter decorators Nest passes (socket, body, ...): {1} is the body. */
  @SubscribeMessage('ship')
  @WithLock('shipment:{1.id}', 2_000)
  ship(_socket: unknown, shipment: { id: string }) {
    return { event: 'shipped', data: { lock: this.redlock.currentLock()?.resources, shipment } };
  }
}

/** The `ws` package's client (the package ships no types, and this repository has no @types/ws). */
interface WsClient extends NodeJS.EventEmitter {
  send(data: string): void;
  terminate(): void;
}
const { WebSocket } = createRequire(import.meta.url)('ws') as { WebSocket: new (url: string) => WsClient };

interface Message {
  event: string;
  data: unknown;
}

/** One replica: the gateway on the app's own HTTP server, through the `ws` adapter. */
async function replica(debug: string[] = []): Promise<string> {
  const logger = { warn: () => {}, debug: (line: string) => void debug.push(line) };
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), logger })],
    providers: [PaymentsGateway],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  app.useWebSocketAdapter(new WsAdapter(app));
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return urlOf(app).replace('http:', 'ws:');
}

/** A connected client; `next()` is the next message the server sends it. */
async function client(url: string) {
  const socket = new WebSocket(url);
  sockets.push(socket);
  const inbox: Message[] = [];
  const waiting: ((message: Message) => void)[] = [];
  socket.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as Message;
    const waiter = waiting.shift();
    if (waiter) waiter(message);
    else inbox.push(message);
  });
  await once(socket, 'open');
  return {
    send: (event: string, data: unknown) => socket.send(JSON.stringify({ event, data })),
    next: () => (inbox.length ? Promise.resolve(inbox.shift()!) : new Promise<Message>((resolve) => waiting.push(resolve))),
  };
}

async function ask(url: string, event: string, data: unknown): Promise<Message> {
  const socket = await client(url);
  socket.send(event, data);
  return socket.next();
}

describe('@WithLock on a websocket gateway handler', () => {
  it('serialises the same order across two replicas (and the probe does see overlap without the lock)', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    await Promise.all(Array.from({ length: 8 }, (_, i) => ask(i % 2 ? a : b, 'pay-unlocked', { orderId: '1' })));
    expect(state.probe.max).toBeGreaterThan(1);

    state.probe = new ConcurrencyProbe();
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(i % 2 ? a : b, 'pay', { orderId: '1' })));
    expect(replies).toEqual(Array.from({ length: 8 }, () => ({ event: 'paid', data: '1' })));
    expect(state.probe.entries).toBe(8);
    expect(state.probe.max).toBe(1);
  });

  it("reads {N} as the handler's Nth parameter, as its parameter decorators resolve it", async () => {
    const url = await replica();
    expect(await ask(url, 'refund', { customer: { id: 'c-7' } })).toEqual({ event: 'refunded', data: { lock: ['customer:c-7'], socket: true } });
    expect(await ask(url, 'ship', { id: 's-1' })).toEqual({ event: 'shipped', data: { lock: ['shipment:s-1'], shipment: { id: 's-1' } } });
  });

  it('answers a lock held by another replica with the exception event the client receives', async () => {
    const debug: string[] = [];
    const [a, b] = await Promise.all([replica(), replica(debug)]);
    const holder = await client(a);
    holder.send('hold', { orderId: '9' });
    await state.entered.promise;
    expect(await ask(b, 'pay-now', { orderId: '9' })).toEqual({
      event: 'exception',
      data: {
        status: 'error',
        code: 'LOCK_HELD',
        message: 'order:9 is locked by another operation; retry later',
        resources: ['order:9'],
        retryAfterMs: expect.any(Number),
      },
    });

    // Under onLocked: 'skip' the handler does not run and nothing is sent back: the next
    // message this client gets answers its next request.
    const skipper = await client(b);
    skipper.send('pay-if-idle', { orderId: '9' });
    await expect.poll(() => debug).toEqual(['PaymentsGateway.payIfIdle skipped: order:9 held by another owner']);
    skipper.send('ship', { id: 's-2' });
    expect(await skipper.next()).toMatchObject({ event: 'shipped' });
    expect(state.ran).toBe(0);

    state.gate.resolve();
    expect(await holder.next()).toEqual({ event: 'released', data: true });
  });

  it("answers a body that cannot form the key as the client's mistake, naming the placeholder", async () => {
    const url = await replica();
    expect(await ask(url, 'pay', { orderId: ['a', 'b'] })).toEqual({
      event: 'exception',
      data: {
        status: 'error',
        code: 'INVALID_ARGUMENT',
        message:
          'invalid {0} in lock key "order:{0}": an array (expected a string, a number, a bigint, a boolean or an object with its own toString())',
        placeholder: '{0}',
      },
    });
  });

  it('answers too few masters with QUORUM_UNREACHABLE', async () => {
    const url = await replica();
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    expect(await ask(url, 'pay-now', { orderId: '3' })).toEqual({
      event: 'exception',
      data: expect.objectContaining({ status: 'error', code: 'QUORUM_UNREACHABLE', resources: ['order:3'] }),
    });
  });
});
