import 'reflect-metadata';
import { Controller, Get, HttpException, Injectable, Module, Param } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  InvalidArgumentError,
  LockHeldError,
  LockLostError,
  QuorumUnreachableError,
  Redlock,
  RedlockConfigError,
  RedlockModule,
  RedlockService,
  WithLock,
} from '../../lib/index.js';
import { RedlockHealthIndicator } from '../../lib/terminus/index.js';
import { InMemoryRedlock, RedlockTestingModule } from '../../lib/testing/index.js';
import { closeAll, closeApp, createApp, urlOf } from './nest-helpers.js';

// What RedlockTestingModule adds to the lock contract (test/contract/, which proves it behaves as
// RedlockModule on real masters does): how it is registered in place of RedlockModule, its
// controls and their mistakes, and the engine on fake timers.

afterEach(async () => {
  vi.useRealTimers();
  await closeAll();
});

@Controller('orders')
class OrdersController {
  constructor(private readonly redlock: RedlockService) {}

  @Get(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  pay(@Param('id') id: string) {
    return { id, lock: this.redlock.currentLock()?.resources };
  }
}

/** The registration an app would export, so that its tests can override exactly that import. */
const locks = RedlockModule.forRootAsync({
  useFactory: () => ({ nodes: ['redis://127.0.0.1:1'] }),
});

@Module({ imports: [locks], controllers: [OrdersController] })
class AppModule {}

describe('registration', () => {
  it('replaces the app module own RedlockModule registration through overrideModule, connecting to nothing', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideModule(locks)
      .useModule(RedlockTestingModule.forRoot())
      .compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await app.listen(0, '127.0.0.1');
      const engine = app.get(InMemoryRedlock);
      expect(app.get(Redlock)).toBe(engine);
      expect(app.get(RedlockService).redlock).toBe(engine);
      engine.holdElsewhere('order:1', { ttlMs: 30_000 });
      const refused = await request(urlOf(app)).get('/orders/1/pay');
      expect(refused.status).toBe(409);
      expect(refused.headers['retry-after']).toBe('30');
      expect(await request(urlOf(app)).get('/orders/2/pay').expect(200)).toMatchObject({ body: { id: '2', lock: ['order:2'] } });
    } finally {
      await app.close();
    }
  });

  it('takes forRootAsync and isGlobal, and the options of RedlockModule (nodes ignored)', async () => {
    @Injectable()
    class Jobs {
      constructor(readonly redlock: RedlockService) {}
    }
    @Module({ providers: [Jobs], exports: [Jobs] })
    class JobsModule {}

    const app = await createApp({
      imports: [
        RedlockTestingModule.forRootAsync({
          isGlobal: true,
          useFactory: async () => ({ nodes: ['redis://never-connected:6379'], defaultTtlMs: 1_234, keyPrefix: 'app:' }),
        }),
        JobsModule,
      ],
    });
    const lock = await app.get(Jobs).redlock.acquire('r');
    expect(lock.ttlMs).toBe(1_234);
    expect(lock.keys).toEqual(['app:r']);
    await lock.release();
  });

  it('refuses the options RedlockModule refuses, naming itself and the option', async () => {
    for (const [options, message] of [
      [{ defaultTtlMs: 0 }, /^RedlockTestingModule: options\.defaultTtlMs must be a positive integer/],
      [{ defaultWait: { onLocked: 'later' } }, /^RedlockTestingModule: options\.defaultWait\.onLocked must be/],
      [{ driftFactor: 2 }, /^RedlockTestingModule: invalid options\.driftFactor/],
    ] as const) {
      const compiling = Test.createTestingModule({ imports: [RedlockTestingModule.forRoot(options as never)] }).compile();
      await expect(compiling).rejects.toThrow(RedlockConfigError);
      await expect(compiling).rejects.toThrow(message);
    }
  });

  it('maps errors as RedlockModule does, errorMapper included', async () => {
    const app = await createApp(
      {
        imports: [RedlockTestingModule.forRoot({ errorMapper: (error) => new HttpException({ code: error.code }, 423) })],
        controllers: [OrdersController],
      },
      { listen: true },
    );
    app.get(InMemoryRedlock).holdElsewhere('order:3');
    const res = await request(urlOf(app)).get('/orders/3/pay');
    expect(res.status).toBe(423);
    expect(res.body).toEqual({ code: 'LOCK_HELD' });
  });

  it('answers a terminus health check: up, then down while the quorum is unreachable', async () => {
    @Controller('health')
    class HealthController {
      constructor(
        private readonly health: HealthCheckService,
        private readonly redlock: RedlockHealthIndicator,
      ) {}
      @Get()
      @HealthCheck()
      check() {
        return this.health.check([() => this.redlock.isHealthy()]);
      }
    }
    const app = await createApp(
      { imports: [RedlockTestingModule.forRoot({ isGlobal: true }), TerminusModule], controllers: [HealthController], providers: [RedlockHealthIndicator] },
      { listen: true },
    );
    expect((await request(urlOf(app)).get('/health')).status).toBe(200);
    app.get(InMemoryRedlock).makeQuorumUnreachable();
    const down = await request(urlOf(app)).get('/health');
    expect(down.status).toBe(503);
    expect(down.body.error.redlock).toMatchObject({ status: 'down', voting: 0, quorum: 1 });
  });
});

describe('controls', () => {
  async function testApp() {
    const app = await createApp({ imports: [RedlockTestingModule.forRoot()] });
    return { engine: app.get(InMemoryRedlock), service: app.get(RedlockService), app };
  }

  it('refuse what cannot happen with a typed error naming it', async () => {
    const { engine, service } = await testApp();
    const lock = await service.acquire('mine');
    expect(() => engine.holdElsewhere('mine')).toThrow(InvalidArgumentError);
    expect(() => engine.holdElsewhere('mine')).toThrow(/"mine" \(held by a lock of this application: call loseLock\(\) first\)/);
    expect(() => engine.loseLock('nobody-holds-it')).toThrow(/"nobody-holds-it" \(no lock of this application holds it\)/);
    expect(() => engine.holdElsewhere('other', { ttlMs: 0 })).toThrow(/invalid options\.ttlMs: 0/);
    expect(() => engine.holdElsewhere('')).toThrow(InvalidArgumentError);
    expect(engine.releaseElsewhere('never-held')).toBe(false);
    await lock.release();
  });

  it('say what is held and who waits', async () => {
    const { engine, service } = await testApp();
    engine.holdElsewhere(['a', 'b']);
    expect([engine.isHeld('a'), engine.isHeld('b'), engine.isHeld('c')]).toEqual([true, true, false]);
    const first = service.acquire('a');
    const second = service.acquire('a');
    await vi.waitFor(() => expect(engine.waitingFor('a')).toBe(2));
    expect(engine.releaseElsewhere('a')).toBe(true);
    const lock = await first;
    expect(engine.waitingFor('a')).toBe(1);
    await lock.release();
    await (await second).release();
    expect(engine.waitingFor('a')).toBe(0);
    expect([engine.isHeld('a'), engine.isHeld('b')]).toEqual([false, true]);
  });

  it("report to the app's instrumentation as the real engine does, while still counting who waits", async () => {
    // A class with private state, as instrumentation often is: its hooks run on the instance.
    class Hooks {
      readonly #seen: string[] = [];
      get seen() {
        return this.#seen;
      }
      acquireStarted() {
        return { waiting: () => this.#seen.push('waiting'), ended: (outcome: string) => this.#seen.push(outcome) };
      }
      lockHeld() {
        this.#seen.push('held');
      }
      lockReleased() {
        this.#seen.push('released');
      }
    }
    const hooks = new Hooks();
    const engine = new InMemoryRedlock({ instrumentation: hooks });
    engine.holdElsewhere('observed');
    const waiting = engine.acquire('observed', 1_000);
    await vi.waitFor(() => expect(engine.waitingFor('observed')).toBe(1));
    engine.releaseElsewhere('observed');
    await (await waiting).release();
    expect(engine.waitingFor('observed')).toBe(0);
    expect(hooks.seen).toEqual(['waiting', 'held', 'acquired', 'released']);
  });

  it('hold elsewhere without a ttl until released: no Retry-After is known, so 409 says 1 s', async () => {
    const app = await createApp({ imports: [RedlockTestingModule.forRoot()], controllers: [OrdersController] }, { listen: true });
    app.get(InMemoryRedlock).holdElsewhere('order:4');
    const error = await app.get(RedlockService).acquire('order:4', 1_000, { waitTimeoutMs: 50 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect((error as LockHeldError).retryAfterMs).toBeUndefined();
    const res = await request(urlOf(app)).get('/orders/4/pay');
    expect(res.status).toBe(409);
    expect(res.headers['retry-after']).toBe('1');
  });

  it('make the quorum unreachable as masters going away would: no acquire, no extension, a release that leaves the key', async () => {
    const { engine, service } = await testApp();
    const lock = await service.acquire('outage', 5_000);
    engine.makeQuorumUnreachable();
    await expect(service.tryAcquire('other')).rejects.toBeInstanceOf(QuorumUnreachableError);
    await expect(lock.extend()).rejects.toBeInstanceOf(QuorumUnreachableError);
    expect(lock.signal.aborted).toBe(false);
    expect(await lock.release()).toMatchObject({ releasedOn: 0, heldUntilRelease: false });
    engine.restoreQuorum();
    // The masters never heard of the release: the key lives out its ttl.
    expect(engine.isHeld('outage')).toBe(true);
    expect(await service.tryAcquire('outage')).toBeNull();
  });

  it('run on fake timers: advancing time expires another owner and a lock that is not extended', async () => {
    vi.useFakeTimers();
    const engine = new InMemoryRedlock();
    engine.holdElsewhere('slow', { ttlMs: 60_000 });
    let acquired = false;
    const waiting = engine.acquire('slow', 5_000, { waitTimeoutMs: 120_000 }).then((lock) => {
      acquired = true;
      return lock;
    });
    await vi.advanceTimersByTimeAsync(59_000);
    expect(acquired).toBe(false);
    await vi.advanceTimersByTimeAsync(2_000);
    const lock = await waiting;
    const signal = lock.signal;
    expect(lock.remainingMs()).toBeGreaterThan(0);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect(engine.isHeld('slow')).toBe(false);
    // Auto-extension keeps a lock alive for as long as the work runs, in fake time too.
    const aborted = await engine.using('kept', 1_000, async (inner) => {
      await vi.advanceTimersByTimeAsync(10_000);
      return inner.aborted;
    });
    expect(aborted).toBe(false);
  });

  it('are undone by app shutdown: every lock of the app is released and its signal fired', async () => {
    const { engine, service, app } = await testApp();
    const lock = await service.acquire('until-shutdown');
    await closeApp(app);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect(engine.isHeld('until-shutdown')).toBe(false);
  });
});
