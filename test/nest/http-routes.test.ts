import 'reflect-metadata';
import {
  Body,
  type CanActivate,
  Controller,
  createParamDecorator,
  type ExecutionContext,
  Get,
  Header,
  HttpCode,
  HttpException,
  ImATeapotException,
  Injectable,
  Param,
  Post,
  Query,
  SetMetadata,
  UseGuards,
} from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants.js';
import { Reflector } from '@nestjs/core';
import { Observable } from 'rxjs';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  LockHeldError,
  type RedlockError,
  RedlockInterceptor,
  RedlockModule,
  RedlockService,
  WithLock,
} from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import {
  closeAll,
  ConcurrencyProbe,
  createApp,
  type Deferred,
  deferred,
  directClients,
  fleetOptions,
  mastersHolding,
  urlOf,
} from './nest-helpers.js';

// End-to-end: real redis-server masters, real HTTP servers, supertest. Every decorated route
// goes through RedlockInterceptor, registered globally by RedlockModule.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(5);
});
afterEach(closeAll);
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
});

/** What the routes below share with the test that drives them; reset before each test. */
const state = {
  probe: new ConcurrencyProbe(),
  entered: deferred(),
  gate: deferred(),
};
beforeEach(() => {
  state.probe = new ConcurrencyProbe();
  state.entered = deferred();
  state.gate = deferred();
});

const HOLD_TTL_MS = 2_000;

@Controller('work')
class WorkController {
  constructor(private readonly redlock: RedlockService) {}

  @Get('locked/:id')
  @WithLock('work:{0}', HOLD_TTL_MS)
  async locked(@Param('id') _id: string) {
    await state.probe.section(5);
    return { ok: true };
  }

  @Get('unlocked/:id')
  async unlocked(@Param('id') _id: string) {
    await state.probe.section(5);
    return { ok: true };
  }

  /** Holds the lock until the test opens the gate. */
  @Get('hold/:id')
  @WithLock('work:{0}', HOLD_TTL_MS)
  async hold(@Param('id') _id: string) {
    state.entered.resolve();
    await state.gate.promise;
    return { held: this.redlock.currentLock()?.resources };
  }

  /** Holds the lock for 150 ms of work. */
  @Get('busy/:id')
  @WithLock('work:{0}', HOLD_TTL_MS)
  async busy(@Param('id') _id: string) {
    state.entered.resolve();
    await new Promise((resolve) => setTimeout(resolve, 150));
    return { ok: true };
  }

  @Get('try/:id')
  @WithLock('work:{0}', { ttlMs: HOLD_TTL_MS, onLocked: 'fail' })
  try(@Param('id') id: string) {
    return { got: id };
  }

  @Get('wait-briefly/:id')
  @WithLock('work:{0}', { ttlMs: HOLD_TTL_MS, waitTimeoutMs: 200 })
  waitBriefly(@Param('id') id: string) {
    return { got: id };
  }

  @Get('throws/:id')
  @WithLock('work:{0}', HOLD_TTL_MS)
  throws(@Param('id') _id: string) {
    throw new Error('handler failed');
  }

  /** Returns at once; the work is the Observable, which ends when the test opens the gate. */
  @Get('stream/:id')
  @WithLock('work:{0}', HOLD_TTL_MS)
  stream(@Param('id') _id: string): Observable<{ streamed: boolean }> {
    return new Observable((subscriber) => {
      state.entered.resolve();
      void state.gate.promise.then(() => {
        subscriber.next({ streamed: true });
        subscriber.complete();
      });
    });
  }
}

const ROLE = 'test:role';

@Injectable()
class RoleGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const role = this.reflector.get<string | undefined>(ROLE, context.getHandler());
    context.switchToHttp().getResponse<{ setHeader(n: string, v: string): void }>().setHeader('x-role', String(role));
    return role !== undefined;
  }
}

@Controller('meta')
@UseGuards(RoleGuard)
class MetaController {
  constructor(private readonly redlock: RedlockService) {}

  @WithLock('meta:above')
  @Get('above')
  @SetMetadata(ROLE, 'admin')
  @HttpCode(202)
  @Header('x-route', 'above')
  above() {
    return { lock: this.redlock.currentLock()?.resources };
  }

  @Get('below')
  @SetMetadata(ROLE, 'admin')
  @HttpCode(202)
  @Header('x-route', 'below')
  @WithLock('meta:below')
  below() {
    return { lock: this.redlock.currentLock()?.resources };
  }
}

const CurrentUser = createParamDecorator((field: string, context: ExecutionContext) => {
  const req = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
  return { [field]: req.headers['x-user'] };
});

@Controller('args')
class ArgsController {
  constructor(private readonly redlock: RedlockService) {}

  @Post('items/:id')
  @WithLock(['item:{0}', 'cart:{1.cart}', 'q:{2}', 'user:{3.id}'])
  post(@Param('id') _id: string, @Body() _body: unknown, @Query('q') _q: string, @CurrentUser('id') _user: unknown) {
    return { lock: this.redlock.currentLock()?.resources };
  }

  @Get('by-query')
  @WithLock('q:{0}')
  byQuery(@Query('id') _id?: string) {
    return { ok: true };
  }
}

const nodes = () => fleetOptions(fleet);

/** Supertest sends nothing until awaited: start the request now, await its response later. */
function start(test: request.Test): Promise<request.Response> {
  return test.then((response) => response);
}

async function workApp(extra: Parameters<typeof RedlockModule.forRoot>[0] | object = {}) {
  const app = await createApp(
    { imports: [RedlockModule.forRoot({ ...nodes(), ...extra })], controllers: [WorkController] },
    { listen: true },
  );
  return urlOf(app);
}

describe('a decorated route', () => {
  it('serialises concurrent requests for one key (and the probe does see overlap without the lock)', async () => {
    const url = await workApp();
    const burst = (path: string) => Promise.all(Array.from({ length: 8 }, () => request(url).get(path)));

    const unlocked = await burst('/work/unlocked/1');
    expect(unlocked.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(state.probe.max).toBeGreaterThan(1);

    state.probe = new ConcurrencyProbe();
    const locked = await burst('/work/locked/1');
    expect(locked.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(state.probe.entries).toBe(8);
    expect(state.probe.max).toBe(1);
  });

  it('makes two app instances contend for the same key', async () => {
    const [urlA, urlB] = await Promise.all([workApp(), workApp()]);

    const holding = start(request(urlA).get('/work/hold/2'));
    await state.entered.promise;
    const refused = await request(urlB).get('/work/try/2');
    expect(refused.status).toBe(409);
    state.gate.resolve();
    expect((await holding).body).toEqual({ held: ['work:2'] });
    expect((await request(urlB).get('/work/try/2')).status).toBe(200);

    // And a burst split over both apps never overlaps.
    const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => request(i % 2 ? urlA : urlB).get('/work/locked/3')));
    expect(burst.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(state.probe.max).toBe(1);
  });

  it('hands the lock to a request waiting in another app as soon as it is released, not when its ttl runs out', async () => {
    const [urlA, urlB] = await Promise.all([workApp(), workApp()]);
    const timed = (test: request.Test) => start(test).then((response) => ({ response, at: performance.now() }));
    const holding = timed(request(urlA).get('/work/busy/11'));
    await state.entered.promise;
    const waiting = timed(request(urlB).get('/work/locked/11')); // refused at first: waits 150 ms
    const [held, waited] = await Promise.all([holding, waiting]);
    expect([held.response.status, waited.response.status]).toEqual([200, 200]);
    // Woken by the release: a waiter that slept until the key expired would take ~HOLD_TTL_MS.
    expect(waited.at - held.at).toBeLessThan(HOLD_TTL_MS / 4);
  });

  it('answers 409 with Retry-After and a body naming the resource, not the token, under the fail policy', async () => {
    const url = await workApp();
    const masters = directClients(fleet);
    const holding = start(request(url).get('/work/hold/4'));
    await state.entered.promise;
    const tokens = await Promise.all(masters.map((m) => m.get('redlock:work:4')));
    const token = tokens.find((t) => t !== null);
    expect(token).toBeTruthy();

    const res = await request(url).get('/work/try/4');
    state.gate.resolve();
    await holding;

    expect(res.status).toBe(409);
    const retryAfter = Number(res.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(HOLD_TTL_MS / 1000));
    expect(res.body).toEqual({
      statusCode: 409,
      error: 'Conflict',
      message: expect.stringContaining('work:4'),
      resources: ['work:4'],
    });
    expect(res.text).not.toContain(token!);
  });

  it('answers 409 when the wait policy times out', async () => {
    const url = await workApp();
    const holding = start(request(url).get('/work/hold/5'));
    await state.entered.promise;
    const started = performance.now();
    const res = await request(url).get('/work/wait-briefly/5');
    const waited = performance.now() - started;
    state.gate.resolve();
    await holding;

    expect(res.status).toBe(409);
    expect(res.headers['retry-after']).toBeDefined();
    expect(waited).toBeGreaterThanOrEqual(190);
  });

  it('releases the lock when the handler throws', async () => {
    const url = await workApp();
    const masters = directClients(fleet);
    const res = await request(url).get('/work/throws/6');
    expect(res.status).toBe(500);
    // Released before the error reached the client: by a quorum (2 of 3) then, the last master may follow.
    expect(await mastersHolding(masters, 'redlock:work:6')).toBeLessThanOrEqual(1);
    await vi.waitFor(async () => expect(await mastersHolding(masters, 'redlock:work:6')).toBe(0));
    expect((await request(url).get('/work/try/6')).status).toBe(200);
  });

  it('holds the lock until an Observable result completes, not until the handler returns', async () => {
    const url = await workApp();
    const masters = directClients(fleet);
    const streaming = start(request(url).get('/work/stream/7'));
    await state.entered.promise;

    expect(await mastersHolding(masters, 'redlock:work:7')).toBeGreaterThanOrEqual(3);
    expect((await request(url).get('/work/try/7')).status).toBe(409);

    state.gate.resolve();
    const res = await streaming;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ streamed: true });
    // The release settles at a quorum: a straggler master frees the key a moment later.
    await expect.poll(() => mastersHolding(masters, 'redlock:work:7')).toBe(0);
  });
});

describe('route metadata and arguments', () => {
  it('keeps route, guard, status and header metadata with @WithLock above or below @Get()', async () => {
    const app = await createApp(
      { imports: [RedlockModule.forRoot(nodes())], controllers: [MetaController], providers: [RoleGuard] },
      { listen: true },
    );
    const url = urlOf(app);
    for (const route of ['above', 'below']) {
      const res = await request(url).get(`/meta/${route}`);
      expect(res.status).toBe(202);
      expect(res.headers['x-route']).toBe(route);
      expect(res.headers['x-role']).toBe('admin');
      expect(res.body).toEqual({ lock: [`meta:${route}`] });
    }
    expect(Reflect.getMetadata(PATH_METADATA, MetaController.prototype.above)).toBe('above');
    expect(Reflect.getMetadata(PATH_METADATA, MetaController.prototype.below)).toBe('below');
    // The interceptor does not replace handlers: the controller instance keeps the prototype's.
    expect(app.get(MetaController).above).toBe(MetaController.prototype.above);
  });

  it('builds keys from @Param, @Body, @Query and custom parameter decorators', async () => {
    const app = await createApp(
      { imports: [RedlockModule.forRoot(nodes())], controllers: [ArgsController] },
      { listen: true },
    );
    const res = await request(urlOf(app))
      .post('/args/items/42?q=blue')
      .set('x-user', 'u-9')
      .send({ cart: 'c-1' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ lock: ['item:42', 'cart:c-1', 'q:blue', 'user:u-9'] });
  });

  it('fails the call, without locking "undefined", when the key reads a missing value', async () => {
    const app = await createApp(
      { imports: [RedlockModule.forRoot({ ...nodes(), errorMapper: (error) => new HttpException(error.message, 400) })], controllers: [ArgsController] },
      { listen: true },
    );
    const masters = directClients(fleet);
    const res = await request(urlOf(app)).get('/args/by-query');
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/\{0\} in lock key template "q:\{0\}" of ArgsController\.byQuery: undefined/);
    expect(await mastersHolding(masters, 'redlock:q:undefined')).toBe(0);
    expect((await request(urlOf(app)).get('/args/by-query?id=1')).status).toBe(200);
  });
});

class LockedInterceptor extends RedlockInterceptor {
  protected override toHttpException(error: RedlockError, context: ExecutionContext): unknown {
    if (error instanceof LockHeldError) return new HttpException({ busy: error.resources }, 423);
    return super.toHttpException(error, context);
  }
}

/** Its own constructor, for its own dependencies: the base's are injected into properties. */
@Injectable()
class ConstructedInterceptor extends RedlockInterceptor {
  constructor(private readonly locks: RedlockService) {
    super();
  }

  protected override toHttpException(error: RedlockError, context: ExecutionContext): unknown {
    if (error instanceof LockHeldError) return new HttpException({ busy: error.resources, injected: this.locks instanceof RedlockService }, 423);
    return super.toHttpException(error, context);
  }
}

describe('overriding the error mapping', () => {
  async function holdThenTry(url: string, id: string) {
    const holding = start(request(url).get(`/work/hold/${id}`));
    await state.entered.promise;
    const res = await request(url).get(`/work/try/${id}`);
    state.gate.resolve();
    await holding;
    return res;
  }

  it('uses the errorMapper option', async () => {
    const url = await workApp({
      errorMapper: (error: RedlockError) => (error instanceof LockHeldError ? new ImATeapotException() : error),
    });
    expect((await holdThenTry(url, '8')).status).toBe(418);
  });

  it('uses a subclass registered as the interceptor', async () => {
    const url = await workApp({ interceptor: LockedInterceptor });
    const res = await holdThenTry(url, '9');
    expect(res.status).toBe(423);
    expect(res.body).toEqual({ busy: ['work:9'] });
  });

  it('uses a subclass with a constructor of its own, the base still injected', async () => {
    const url = await workApp({ interceptor: ConstructedInterceptor });
    const res = await holdThenTry(url, '19');
    expect(res.status).toBe(423);
    expect(res.body).toEqual({ busy: ['work:19'], injected: true });
    // Undecorated routes pass through, decorated ones lock: the base's planner and reflector are there.
    expect((await request(url).get('/work/try/20')).status).toBe(200);
  });
});

describe('with 3 of 5 masters down', () => {
  it('answers 503 Service Unavailable without naming the masters', async () => {
    const url = await workApp();
    expect((await request(url).get('/work/try/10')).status).toBe(200);
    try {
      await Promise.all([fleet.kill(0), fleet.kill(1), fleet.kill(2)]);
      for (const path of ['/work/try/10', '/work/locked/10']) {
        const res = await request(url).get(path);
        expect(res.status).toBe(503);
        expect(res.body).toEqual({
          statusCode: 503,
          error: 'Service Unavailable',
          message: expect.stringContaining('work:10'),
          resources: ['work:10'],
        });
        expect(res.text).not.toContain('127.0.0.1');
      }
    } finally {
      await Promise.all([0, 1, 2].map((i) => (fleet.nodes[i]!.running ? undefined : fleet.start(i))));
    }
  });
});
