import 'reflect-metadata';
import { Controller, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, Ctx, MessagePattern, Payload, type ClientProxy, TcpContext, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { lastValueFrom, toArray } from 'rxjs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedlockModule, RedlockService } from '../../../lib/index.js';
import { WithLock } from '../../../lib/with-lock.decorator.js';
import { freePort } from '../../support/free-port.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { ConcurrencyProbe, deferred, fleetOptions } from '../nest-helpers.js';

// @WithLock on message handlers of a real TCP microservice (@nestjs/microservices), called by a
// real ClientProxy: keys read the handler's parameters (@Payload('orderId'), @Ctx()), two
// replicas on the same masters exclude each other, and lock failures reach the caller as the
// RpcException's error.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
const services: INestMicroservice[] = [];
const clients: ClientProxy[] = [];
afterEach(async () => {
  state.gate.resolve();
  for (const client of clients.splice(0)) await client.close();
  await Promise.allSettled(services.splice(0).map((service) => service.close()));
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});
afterAll(async () => {
  await fleet?.stopAll();
});

const state = { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), contexts: [] as unknown[] };
beforeEach(() => Object.assign(state, { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), contexts: [] }));

@Controller()
class PaymentsHandler {
  constructor(private readonly redlock: RedlockService) {}

  @MessagePattern('pay')
  @WithLock('order:{0}', 2_000)
  async pay(@Payload('orderId') orderId: string) {
    await state.probe.section(5);
    return { paid: orderId };
  }

  @MessagePattern('pay-unlocked')
  async payUnlocked(@Payload('orderId') orderId: string) {
    await state.probe.section(5);
    return { paid: orderId };
  }

  /** {1} is the second parameter, the payload's customer, not the context's second argument (the TcpContext). */
  @MessagePattern('refund')
  @WithLock('customer:{1.id}', { ttlMs: 2_000, onLocked: 'fail' })
  refund(@Ctx() context: TcpContext, @Payload('customer') _customer: { id: string }) {
    state.contexts.push(context);
    return { lock: this.redlock.currentLock()?.resources };
  }

  @MessagePattern('hold')
  @WithLock('order:{0}', 2_000)
  async hold(@Payload('orderId') _orderId: string) {
    state.entered.resolve();
    await state.gate.promise;
    return 'released';
  }

  @MessagePattern('pay-now')
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'fail' })
  payNow(@Payload('orderId') orderId: string) {
    return { paid: orderId };
  }

  @MessagePattern('pay-if-idle')
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'skip' })
  payIfIdle(@Payload('orderId') orderId: string) {
    return { paid: orderId };
  }

  /** Without parameter decorators Nest passes the whole payload: {0} is the payload. */
  @MessagePattern('ship')
  @WithLock('shipment:{0.id}', 2_000)
  ship(shipment: { id: string }) {
    return { lock: this.redlock.currentLock()?.resources, shipment };
  }
}

/** One replica: a TCP microservice on a free port, and a client connected to it. */
async function replica(): Promise<ClientProxy> {
  const port = await freePort();
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot(fleetOptions(fleet))],
    controllers: [PaymentsHandler],
  }).compile();
  const service = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port }, logger: false });
  services.push(service);
  await service.listen();
  const client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
  clients.push(client);
  await client.connect();
  return client;
}

const send = <T = unknown>(client: ClientProxy, pattern: string, data: unknown) => lastValueFrom(client.send<T>(pattern, data));
const failure = (client: ClientProxy, pattern: string, data: unknown) => send(client, pattern, data).then(
  (value) => ({ resolved: value }),
  (error: unknown) => error,
);

describe('@WithLock on a TCP message handler', () => {
  it('serialises the same order across two replicas (and the probe does see overlap without the lock)', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    await Promise.all(Array.from({ length: 8 }, (_, i) => send(i % 2 ? a : b, 'pay-unlocked', { orderId: '1' })));
    expect(state.probe.max).toBeGreaterThan(1);

    state.probe = new ConcurrencyProbe();
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => send(i % 2 ? a : b, 'pay', { orderId: '1' })));
    expect(replies).toEqual(Array.from({ length: 8 }, () => ({ paid: '1' })));
    expect(state.probe.entries).toBe(8);
    expect(state.probe.max).toBe(1);
  });

  it('reads {N} as the handler\'s Nth parameter, as its parameter decorators resolve it', async () => {
    const client = await replica();
    expect(await send(client, 'refund', { customer: { id: 'c-7' } })).toEqual({ lock: ['customer:c-7'] });
    expect(state.contexts[0]).toBeInstanceOf(TcpContext);
    expect(await send(client, 'ship', { id: 's-1' })).toEqual({ lock: ['shipment:s-1'], shipment: { id: 's-1' } });
  });

  it('answers a lock held by another replica with the RpcException error the client receives', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    const holding = send(a, 'hold', { orderId: '9' });
    await state.entered.promise;
    const error = await failure(b, 'pay-now', { orderId: '9' });
    expect(error).toEqual({
      status: 'error',
      code: 'LOCK_HELD',
      message: 'order:9 is locked by another operation; retry later',
      resources: ['order:9'],
      retryAfterMs: expect.any(Number),
    });
    expect((error as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    // Under onLocked: 'skip' the handler does not run, and the reply is empty.
    expect(await lastValueFrom(b.send('pay-if-idle', { orderId: '9' }).pipe(toArray()))).toEqual([]);
    state.gate.resolve();
    expect(await holding).toBe('released');
    expect(await send(b, 'pay-if-idle', { orderId: '9' })).toEqual({ paid: '9' });
  });

  it('answers a payload that cannot form the key as the caller\'s mistake, naming the placeholder', async () => {
    const client = await replica();
    expect(await failure(client, 'pay', { orderId: { nested: true } })).toEqual({
      status: 'error',
      code: 'INVALID_ARGUMENT',
      message:
        'invalid {0} in lock key "order:{0}": an object (expected a string, a number, a bigint, a boolean or an object with its own toString())',
      placeholder: '{0}',
    });
    expect(await failure(client, 'refund', { customer: {} })).toMatchObject({ code: 'INVALID_ARGUMENT', placeholder: '{1.id}' });
  });

  it('answers too few masters with QUORUM_UNREACHABLE', async () => {
    const client = await replica();
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    expect(await failure(client, 'pay-now', { orderId: '3' })).toMatchObject({
      status: 'error',
      code: 'QUORUM_UNREACHABLE',
      resources: ['order:3'],
      message: 'the lock on order:3 cannot be taken: too few lock servers are reachable',
    });
  });
});
