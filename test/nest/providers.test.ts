import 'reflect-metadata';
import { Controller, Get, Injectable, Module, type OnApplicationBootstrap, Scope, SetMetadata } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Redis } from 'ioredis';
import { lastValueFrom, Observable, take, toArray } from 'rxjs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  InvalidArgumentError,
  LockHeldError,
  Redlock,
  RedlockConfigError,
  RedlockModule,
  RedlockService,
  WithLock,
} from '../../lib/index.js';
import { RedisConnections } from '../../lib/redis-connections.js';
import { WITH_LOCK } from '../../lib/redlock.constants.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import {
  closeAll,
  closeApp,
  ConcurrencyProbe,
  createApp,
  deferred,
  directClients,
  fleetOptions,
  mastersHolding,
} from './nest-helpers.js';

// @WithLock on providers that are not controllers: RedlockExplorer wraps the decorated methods
// of each instance at bootstrap. Also RedlockService, reentrancy and shutdown.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
afterEach(closeAll);
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
});

const state = { probe: new ConcurrencyProbe(), afterInner: async () => {} };
beforeEach(() => {
  state.probe = new ConcurrencyProbe();
  state.afterInner = async () => {};
});

const TAG = 'test:tag';
const Tag = (value: string) => SetMetadata(TAG, value);

@Injectable()
class Ledger {
  readonly label = 'ledger';

  constructor(private readonly redlock: RedlockService) {}

  @WithLock('ledger:{0}', 2_000)
  async post(_account: string) {
    await state.probe.section(5);
  }

  async postUnlocked(_account: string) {
    await state.probe.section(5);
  }

  @Tag('above')
  @WithLock('ledger:tagged')
  async taggedAbove() {
    return { self: this.label, lock: this.redlock.currentLock()?.resources };
  }

  @WithLock('ledger:tagged')
  @Tag('below')
  taggedBelow() {
    return this.label; // synchronous: the wrapper returns a promise of it
  }

  @WithLock('ledger:fail', { onLocked: 'fail' })
  async failFast() {
    return 'ran';
  }

  @WithLock('user:{0.id}')
  async touch(_user: { id?: unknown }) {
    return 'touched';
  }

  @WithLock('feed:{0}', 2_000)
  feed(id: string): Observable<string> {
    return new Observable<string>((subscriber) => {
      subscriber.next(`${id}:${this.redlock.currentLock()?.resources.join()}`);
      const timer = setInterval(() => subscriber.next('tick'), 5);
      return () => clearInterval(timer);
    });
  }
}

@Injectable()
class Accounts {
  constructor(private readonly redlock: RedlockService) {}

  @WithLock('acct:{0}', 2_000)
  async transfer(id: string) {
    const outer = this.redlock.currentLock(`acct:${id}`);
    const inner = await this.audit(id);
    await state.afterInner();
    const viaService = await this.redlock.using(`acct:${id}`, async (_signal, lock) => lock === outer);
    const nested = await this.redlock.using(`other:${id}`, async () => ({
      outerStillThere: this.redlock.currentLock(`acct:${id}`) === outer,
      innermost: this.redlock.currentLock()?.resources,
    }));
    return { sameLockInside: inner === outer, viaService, nested, signal: this.redlock.currentSignal() };
  }

  // Fails at once if it ever tried to take the lock its caller holds: no silent 10 s deadlock.
  @WithLock('acct:{0}', { ttlMs: 2_000, onLocked: 'fail' })
  async audit(id: string) {
    return this.redlock.currentLock(`acct:${id}`);
  }
}

/** A decorated method that leaves work running after it returns, as a handler that kicks off a job does. */
@Injectable()
class Jobs {
  background: Promise<unknown> | undefined;

  constructor(private readonly redlock: RedlockService) {}

  @WithLock('job:{0}', 2_000)
  async kickOff(id: string, later: Promise<void>) {
    // Not awaited: it keeps this call's async context, and runs after the call released.
    this.background = later.then(() => this.step(id).then((lock) => ({ ranUnder: lock?.resources }), (error: unknown) => error));
  }

  @WithLock('job:{0}', { ttlMs: 2_000, onLocked: 'fail' })
  async step(id: string) {
    return this.redlock.currentLock(`job:${id}`);
  }
}

/** Collects tagged methods from the instances, as a scheduler or event library would, after the explorer ran. */
@Injectable()
class TagCollector implements OnApplicationBootstrap {
  readonly found = new Map<string, () => unknown>();
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}
  onApplicationBootstrap() {
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, Function> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      for (const name of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const tag = Reflect.getMetadata(TAG, instance[name]!) as string | undefined;
        if (tag) this.found.set(tag, instance[name]!.bind(instance) as () => unknown);
      }
    }
  }
}

@Module({ imports: [DiscoveryModule], providers: [TagCollector], exports: [TagCollector] })
class CollectorModule {}

@Controller('plain')
class PlainController {
  @Get()
  @WithLock('plain')
  get() {
    return 'ok';
  }
}

async function ledgerApp() {
  const app = await createApp({
    imports: [RedlockModule.forRoot(fleetOptions(fleet)), CollectorModule],
    controllers: [PlainController],
    providers: [Ledger, Accounts, Jobs],
  });
  return app;
}

describe('a decorated provider method', () => {
  it('is serialised across two app instances (and the probe does see overlap without the lock)', async () => {
    const [a, b] = await Promise.all([ledgerApp(), ledgerApp()]);
    const ledgers = [a.get(Ledger), b.get(Ledger)];
    expect(ledgers[0]).not.toBe(ledgers[1]);

    await Promise.all(Array.from({ length: 8 }, (_, i) => ledgers[i % 2]!.postUnlocked('acc-1')));
    expect(state.probe.max).toBeGreaterThan(1);

    state.probe = new ConcurrencyProbe();
    await Promise.all(Array.from({ length: 8 }, (_, i) => ledgers[i % 2]!.post('acc-1')));
    expect(state.probe.entries).toBe(8);
    expect(state.probe.max).toBe(1);
  });

  it('keeps its name, this, and every metadata key, whatever the decorator order', async () => {
    const app = await ledgerApp();
    const ledger = app.get(Ledger);
    for (const [name, tag] of [
      ['taggedAbove', 'above'],
      ['taggedBelow', 'below'],
    ] as const) {
      const method = ledger[name];
      expect(method).not.toBe(Ledger.prototype[name]);
      expect(method.name).toBe(name);
      expect(Reflect.getMetadata(TAG, method)).toBe(tag);
      expect(Reflect.getMetadata(WITH_LOCK, method)).toEqual(Reflect.getMetadata(WITH_LOCK, Ledger.prototype[name]));
    }
    expect(await ledger.taggedAbove()).toEqual({ self: 'ledger', lock: ['ledger:tagged'] });
    expect(await ledger.taggedBelow()).toBe('ledger');
    // Only the wrapped methods themselves are added to the instance, never enumerable, no symbols.
    expect(Object.keys(ledger).sort()).toEqual(['label', 'redlock']);
    expect(Object.getOwnPropertySymbols(ledger)).toEqual([]);
    // The class behaves as written outside Nest: its prototype holds a stand-in that runs the
    // original method for an instance Nest did not lock.
    expect(await new Ledger({ currentLock: () => undefined } as unknown as RedlockService).taggedAbove()).toEqual({
      self: 'ledger',
      lock: undefined,
    });
  });

  it('is found locked by code that reads metadata from the instance after bootstrap', async () => {
    const app = await ledgerApp();
    const collector = app.get(TagCollector);
    expect([...collector.found.keys()].sort()).toEqual(['above', 'below']);
    expect(await collector.found.get('above')!()).toEqual({ self: 'ledger', lock: ['ledger:tagged'] });
  });

  it('leaves controllers to the interceptor', async () => {
    const app = await ledgerApp();
    expect(app.get(PlainController).get).toBe(PlainController.prototype.get);
  });

  it('throws the typed LockHeldError under the fail policy', async () => {
    const app = await ledgerApp();
    const held = await app.get(RedlockService).acquire('ledger:fail', 2_000);
    try {
      const error = await app.get(Ledger).failFast().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockHeldError);
      expect((error as LockHeldError).code).toBe('LOCK_HELD');
      expect((error as LockHeldError).resources).toEqual(['ledger:fail']);
    } finally {
      await held.release();
    }
    expect(await app.get(Ledger).failFast()).toBe('ran');
  });

  it('refuses a key that resolves to undefined or to an object without a string form', async () => {
    const app = await ledgerApp();
    const masters = directClients(fleet);
    const ledger = app.get(Ledger);
    for (const user of [{}, { id: null }, { id: { nested: true } }]) {
      const error = await ledger.touch(user).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as Error).message).toContain('{0.id} in lock key template "user:{0.id}" of Ledger.touch');
    }
    expect(await mastersHolding(masters, 'redlock:user:undefined')).toBe(0);
    expect(await mastersHolding(masters, 'redlock:user:[object Object]')).toBe(0);
    expect(await ledger.touch({ id: 42 })).toBe('touched');
  });

  it('holds the lock while an Observable result is subscribed, and releases on unsubscribe', async () => {
    const app = await ledgerApp();
    const masters = directClients(fleet);
    const ledger = app.get(Ledger);
    const feed = ledger.feed('f1');
    expect(feed).toBeInstanceOf(Observable);
    expect(await mastersHolding(masters, 'redlock:feed:f1')).toBe(0); // nothing until subscribed

    const values: string[] = [];
    const seenTwo = deferred();
    const subscription = feed.subscribe((value) => {
      values.push(value);
      if (values.length === 2) seenTwo.resolve();
    });
    await seenTwo.promise;
    expect(values[0]).toBe('f1:feed:f1'); // produced inside the lock's context
    // Held by a quorum when the work began; the last master's grant may land a moment later.
    await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:feed:f1')).toBe(3));
    subscription.unsubscribe();
    await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:feed:f1')).toBe(0));

    // take() completes downstream after unsubscribing upstream, which releases too.
    expect(await lastValueFrom(ledger.feed('f2').pipe(take(3), toArray()))).toHaveLength(3);
    await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:feed:f2')).toBe(0));
  });
});

describe('reentrancy and the lock context', () => {
  it('completes nested calls for held resources without re-acquiring or releasing early', async () => {
    const app = await ledgerApp();
    const masters = directClients(fleet);
    let heldAfterInner = -1;
    state.afterInner = async () => {
      heldAfterInner = await mastersHolding(masters, 'redlock:acct:a1');
    };
    const result = await app.get(Accounts).transfer('a1');
    expect(result.sameLockInside).toBe(true);
    expect(result.viaService).toBe(true);
    expect(heldAfterInner).toBe(3); // the inner call did not release the outer lock
    expect(result.nested).toEqual({ outerStillThere: true, innermost: ['other:a1'] });
    expect(result.signal).toBeInstanceOf(AbortSignal);
    expect(result.signal?.aborted).toBe(false);
    // The release settles once a quorum (2 of 3) freed the key; the last master may follow.
    expect(await mastersHolding(masters, 'redlock:acct:a1')).toBeLessThanOrEqual(1);
    await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:acct:a1')).toBe(0));
  });

  it('does not let background work a call left running re-enter its lock after the call released it', async () => {
    const [app, elsewhere] = await Promise.all([ledgerApp(), ledgerApp()]);
    const jobs = app.get(Jobs);
    const later = deferred();
    await jobs.kickOff('j1', later.promise);
    const other = await elsewhere.get(RedlockService).tryAcquire('job:j1');
    expect(other).not.toBeNull();
    later.resolve();
    // It must contend like any other caller: held elsewhere, so the fail policy refuses it.
    expect(await jobs.background).toBeInstanceOf(LockHeldError);
    await other!.release();
  });

  it('has no current lock or signal outside locked work', async () => {
    const app = await ledgerApp();
    const redlock = app.get(RedlockService);
    expect(redlock.currentLock()).toBeUndefined();
    expect(redlock.currentSignal()).toBeUndefined();
    const inside = await redlock.using('ctx', async (signal, lock) => ({
      same: redlock.currentLock() === lock && redlock.currentLock('ctx') === lock,
      signal: redlock.currentSignal() === signal,
    }));
    expect(inside).toEqual({ same: true, signal: true });
  });

  it('uses defaultTtlMs when a service call omits the ttl', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), defaultTtlMs: 1_234 })] });
    const redlock = app.get(RedlockService);
    expect(redlock.redlock).toBe(app.get(Redlock));
    const lock = await redlock.acquire('ttl');
    expect(lock.ttlMs).toBe(1_234);
    await lock.release();
    const tried = await redlock.tryAcquire('ttl');
    expect(tried?.ttlMs).toBe(1_234);
    await tried?.release();
    const session = await redlock.enter('ttl');
    expect(session.lock.ttlMs).toBe(1_234);
    await session.exit();
  });
});

@Injectable({ scope: Scope.REQUEST })
class PerRequest {
  @WithLock('per-request')
  async run() {}
}

describe('bootstrap checks', () => {
  it('refuses @WithLock on a request-scoped provider, which it could not wrap', async () => {
    const error = await createApp({
      imports: [RedlockModule.forRoot(fleetOptions(fleet))],
      providers: [PerRequest],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(/@WithLock on PerRequest\.run: the provider is request-scoped or transient/);
  });

  it('refuses a second RedlockModule in one application', async () => {
    @Module({ imports: [RedlockModule.forRoot(fleetOptions(fleet))] })
    class Feature {}
    const error = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet)), Feature] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(/registered more than once/);
  });
});

describe('shutdown', () => {
  it('releases held locks (keys gone right after app.close()), then closes only the connections it opened', async () => {
    const mine = new Redis(fleet.urls()[2]!, { maxRetriesPerRequest: 1 });
    mine.on('error', () => {});
    try {
      const [host, port] = fleet.urls()[1]!.replace('redis://', '').split(':');
      const app = await createApp({
        imports: [
          RedlockModule.forRoot({ ...fleetOptions(fleet), nodes: [fleet.urls()[0]!, { host, port: Number(port) }, mine] }),
        ],
        providers: [Accounts],
      });
      const masters = directClients(fleet);
      const redlock = app.get(RedlockService);
      const connections = app.get(RedisConnections);
      expect(connections.owned).toHaveLength(2);

      const forgotten = await redlock.acquire('shutdown:held', 5_000);
      const session = await redlock.enter('shutdown:session', 5_000); // auto-extending
      // Held by a quorum when acquired; the last master's grant may land a moment later.
      await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:shutdown:held')).toBe(3));
      await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:shutdown:session')).toBe(3));

      await closeApp(app);

      // Released, not left to expire (5 s): freed by a quorum at close, the last master within a moment.
      expect(await mastersHolding(masters, 'redlock:shutdown:held')).toBeLessThanOrEqual(1);
      await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:shutdown:held')).toBe(0));
      await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:shutdown:session')).toBe(0));
      expect(forgotten.signal.aborted).toBe(true);
      expect(session.signal.aborted).toBe(true);
      expect((connections.owned as Redis[]).map((client) => client.status)).toEqual(['end', 'end']);
      expect(mine.status).toBe('ready');
      expect(await mine.ping()).toBe('PONG');
    } finally {
      mine.disconnect();
    }
  });
});

describe('a skipping job whose acquire is under way when the application shuts down', () => {
  it('is skipped (resolves undefined, the method never runs, a debug line says why), not failed', async () => {
    // Slow links: the job's one round is still out when the app closes, and releaseAll gives it up.
    const proxies = await Promise.all(fleet.nodes.map((node) => TcpProxy.start({ host: node.host, port: node.port })));
    try {
      let ran = false;
      @Injectable()
      class SettleJob {
        @WithLock('job:settle-at-shutdown', { onLocked: 'skip' })
        async settle() {
          ran = true;
        }
      }
      const debug: string[] = [];
      const logger = { warn: () => {}, debug: (message: string) => debug.push(message) };
      const options = { ...fleetOptions(fleet), nodes: proxies.map((proxy) => proxy.url), logger };
      const app = await createApp({ imports: [RedlockModule.forRoot(options)], providers: [SettleJob] });
      for (const proxy of proxies) proxy.setLatency(300);
      const call = app.get(SettleJob).settle();
      await new Promise((resolve) => setTimeout(resolve, 50));
      await closeApp(app);
      await expect(call).resolves.toBeUndefined();
      expect(ran).toBe(false);
      expect(debug).toContain('SettleJob.settle skipped: the application is shutting down');
    } finally {
      await Promise.all(proxies.map((proxy) => proxy.close()));
    }
  });
});
