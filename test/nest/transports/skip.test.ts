import 'reflect-metadata';
import { Controller, Injectable, Param, Post } from '@nestjs/common';
import { lastValueFrom, Observable, toArray } from 'rxjs';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  LockHeldError,
  QuorumUnreachableError,
  RedlockConfigError,
  RedlockModule,
  RedlockService,
  WithLock,
} from '../../../lib/index.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { closeAll, createApp, fleetOptions, urlOf } from '../nest-helpers.js';

// onLocked: 'skip' on a provider method and on a route: a call that finds the lock held
// elsewhere does not run and yields undefined. Too few masters skips a provider's method too
// (a job's tick), with one WARN per episode; a route still answers 503, a method that did not
// ask to skip still gets the error, and an error of the method's own still reaches its caller.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
afterEach(async () => {
  await closeAll();
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});
afterAll(async () => {
  await closeAll();
  await fleet?.stopAll();
});

const ran = { build: 0, stream: 0, route: 0, post: 0 };
beforeEach(() => Object.assign(ran, { build: 0, stream: 0, route: 0, post: 0 }));

@Injectable()
class Reports {
  constructor(private readonly redlock: RedlockService) {}

  @WithLock('report:{0}', { onLocked: 'skip' })
  async build(day: string) {
    ran.build++;
    return `built ${day}`;
  }

  @WithLock('report:{0}', { onLocked: 'skip' })
  stream(day: string): Observable<string> {
    return new Observable<string>((subscriber) => {
      ran.stream++;
      subscriber.next(day);
      subscriber.complete();
    });
  }

  /** Its own lock is free; inside, it fails fast on another resource that is held elsewhere. */
  @WithLock('report:{0}', { onLocked: 'skip' })
  async buildFromSource(day: string) {
    await this.redlock.using('source', async () => 'read', { retryCount: 0 });
  }
}

@Injectable()
class Ledger {
  @WithLock('ledger:{0}', { onLocked: 'fail' })
  async post(day: string) {
    ran.post++;
    return day;
  }
}

@Controller('reports')
class ReportsController {
  @Post(':day')
  @WithLock('report:{0}', { onLocked: 'skip' })
  run(@Param('day') _day: string) {
    ran.route++;
    return { ran: true };
  }
}

async function reportsApp() {
  return createApp(
    { imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), isGlobal: true })], providers: [Reports], controllers: [ReportsController] },
    { listen: true },
  );
}

/** Another owner (a second app on the same masters) holds `resource` while `work` runs. */
async function whileHeldElsewhere<T>(resource: string, work: () => Promise<T>): Promise<T> {
  const other = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))] });
  const lock = await other.get(RedlockService).acquire(resource, 10_000);
  try {
    return await work();
  } finally {
    await lock.release();
  }
}

describe("onLocked: 'skip'", () => {
  it('makes a provider method return undefined without running while another owner holds the lock', async () => {
    const reports = (await reportsApp()).get(Reports);
    expect(await whileHeldElsewhere('report:mon', () => reports.build('mon'))).toBeUndefined();
    expect(ran.build).toBe(0);
    expect(await reports.build('mon')).toBe('built mon');
    expect(ran.build).toBe(1);
  });

  it('makes an Observable method complete without a value, and without subscribing to the work', async () => {
    const reports = (await reportsApp()).get(Reports);
    expect(await whileHeldElsewhere('report:tue', () => lastValueFrom(reports.stream('tue').pipe(toArray())))).toEqual([]);
    expect(ran.stream).toBe(0);
    expect(await lastValueFrom(reports.stream('tue').pipe(toArray()))).toEqual(['tue']);
  });

  it("is reported to the instrumentation hooks as the call outcome 'skipped', on a provider and on a route", async () => {
    const outcomes: string[] = [];
    const instrumentation = { callStarted: (site: string) => ({ ended: (outcome: string) => void outcomes.push(`${site} ${outcome}`) }) };
    const app = await createApp(
      { imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), instrumentation, isGlobal: true })], providers: [Reports], controllers: [ReportsController] },
      { listen: true },
    );
    await whileHeldElsewhere('report:sat', async () => {
      await app.get(Reports).build('sat');
      await request(urlOf(app)).post('/reports/sat').expect(201);
    });
    await app.get(Reports).build('sat');
    expect(outcomes).toEqual(['Reports.build skipped', 'ReportsController.run skipped', 'Reports.build ran']);
  });

  it("answers a route with its own status and an empty body, and the handler does not run", async () => {
    const url = urlOf(await reportsApp());
    const skipped = await whileHeldElsewhere('report:wed', () => request(url).post('/reports/wed'));
    expect(skipped.status).toBe(201);
    expect(skipped.text).toBe('');
    expect(ran.route).toBe(0);
    await request(url).post('/reports/wed').expect(201, { ran: true });
  });

  it("still throws a LockHeldError that the method's own work raised", async () => {
    const reports = (await reportsApp()).get(Reports);
    const error = await whileHeldElsewhere('source', () => reports.buildFromSource('thu').catch((e: unknown) => e));
    expect(error).toBeInstanceOf(LockHeldError);
    expect((error as LockHeldError).resources).toEqual(['source']);
  });

  it('skips a provider method when too few masters answer, saying so at WARN once per episode and once when it recovers', async () => {
    const lines: { level: string; message: string }[] = [];
    const logger = {
      warn: (message: string) => void lines.push({ level: 'warn', message }),
      log: (message: string) => void lines.push({ level: 'log', message }),
      debug: (message: string) => void lines.push({ level: 'debug', message }),
    };
    const app = await createApp(
      { imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), logger, isGlobal: true })], providers: [Reports], controllers: [ReportsController] },
      { listen: true },
    );
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    const reports = app.get(Reports);
    for (let tick = 0; tick < 3; tick++) expect(await reports.build('fri')).toBeUndefined();
    expect(ran.build).toBe(0);
    const warnings = lines.filter((line) => line.level === 'warn' && line.message.startsWith('Reports.build'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/^Reports\.build skipped: the lock on report:fri cannot be taken: quorum of 2 unreachable for report:fri/);
    expect(warnings[0]!.message).toMatch(/Its calls skip until a lock can be taken again; said once, and again when one is$/);
    // A route has a client waiting on it: it still answers 503, and the handler does not run.
    expect((await request(urlOf(app)).post('/reports/fri')).status).toBe(503);
    expect(ran.route).toBe(0);

    await Promise.all([fleet.start(0), fleet.start(1)]);
    await expect.poll(() => reports.build('fri'), { timeout: 10_000, interval: 100 }).toBe('built fri');
    await reports.build('fri');
    expect(lines.filter((line) => line.message === 'Reports.build: locks can be taken again; its calls run')).toEqual([
      { level: 'log', message: 'Reports.build: locks can be taken again; its calls run' },
    ]);
    expect(lines.filter((line) => line.level === 'warn' && line.message.startsWith('Reports.build'))).toHaveLength(1);
  });

  it("still throws a QuorumUnreachableError to a method that asked to see lock errors (onLocked: 'fail')", async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), isGlobal: true })], providers: [Reports, Ledger] });
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    const error = await app.get(Ledger).post('fri').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    expect(ran.post).toBe(0);
  });

  it('is not accepted as the module-wide default, where calls would vanish unnoticed', async () => {
    const error = await createApp({
      imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), defaultWait: { onLocked: 'skip' as 'wait' } })],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toBe(`RedlockModule: options.defaultWait.onLocked must be 'wait' or 'fail' (got "skip")`);
  });
});
