import 'reflect-metadata';
import { Inject, Injectable, type INestApplication, type LoggerService } from '@nestjs/common';
import { Cron, Interval, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, RedlockService, WithLock } from '../../../lib/index.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { PATIENT } from '../../support/masters.js';
import { type Deferred, deferred, fleetOptions } from '../nest-helpers.js';

// The real @nestjs/schedule: two app instances ("replicas") on the same masters, each running
// the same @Interval job under @WithLock(..., { onLocked: 'skip' }), whose body lasts longer
// than the interval. Runs never overlap, the other replica's ticks (and the running replica's
// own) are skipped meanwhile, and nothing is logged above debug.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
const apps: INestApplication[] = [];
afterEach(async () => {
  // Whatever run is still in its body ends now, so that closing does not wait on it.
  state.round.gate.resolve();
  await Promise.allSettled(apps.splice(0).map((app) => app.close()));
});
afterAll(async () => {
  await fleet?.stopAll();
});

const REPLICA = Symbol('replica');
const INTERVAL_MS = 20;

/** One run of the job, as the test drives it: the run says it started, then waits for the gate. */
interface Round {
  readonly started: Deferred<string>;
  readonly gate: Deferred;
}
const newRound = (): Round => ({ started: deferred<string>(), gate: deferred() });

const state = {
  round: newRound(),
  /** Every start and end of a run, on either replica, in the order they happened. */
  history: [] as { replica: string; event: 'start' | 'end' }[],
  active: 0,
  maxActive: 0,
};

@Injectable()
class ReconcileJob {
  constructor(
    @Inject(REPLICA) private readonly replica: string,
    private readonly redlock: RedlockService,
  ) {}

  // A long ttl: its node timeout (ttl / 10) must ride out a starved machine, where a timed-out round would be logged.
  @Interval(INTERVAL_MS)
  @WithLock('job:reconcile', { onLocked: 'skip', ttlMs: 10_000 })
  async reconcile() {
    state.active++;
    state.maxActive = Math.max(state.maxActive, state.active);
    state.history.push({ replica: this.replica, event: 'start' });
    expect(this.redlock.currentLock()?.resources).toEqual(['job:reconcile']);
    const round = state.round;
    round.started.resolve(this.replica);
    await round.gate.promise;
    state.history.push({ replica: this.replica, event: 'end' });
    state.active--;
  }
}

/** Records what is logged, by level: Nest's own logger (the scheduler's errors land there) or a module's. */
class RecordingLogger implements LoggerService {
  readonly lines: Record<'error' | 'warn' | 'log' | 'debug' | 'verbose' | 'fatal', string[]> = {
    error: [],
    warn: [],
    log: [],
    debug: [],
    verbose: [],
    fatal: [],
  };
  error = (message: unknown) => void this.lines.error.push(String(message));
  warn = (message: unknown) => void this.lines.warn.push(String(message));
  log = (message: unknown) => void this.lines.log.push(String(message));
  debug = (message: unknown) => void this.lines.debug.push(String(message));
  verbose = (message: unknown) => void this.lines.verbose.push(String(message));
  fatal = (message: unknown) => void this.lines.fatal.push(String(message));
}

/**
 * One replica. The two import ScheduleModule and RedlockModule in opposite orders, one of them
 * global: @nestjs/schedule must find the job locked whichever module's hooks run first.
 */
async function replica(name: string, nestLogger: RecordingLogger, lockLogger: RecordingLogger): Promise<void> {
  // fleetOptions' patient node timeout matters here: the test asserts no error is logged, and a
  // loaded machine once outlasted the default 100 ms, a QuorumUnreachableError logged by a tick.
  const redlock = RedlockModule.forRoot({ ...fleetOptions(fleet), logger: lockLogger, isGlobal: name === 'b' });
  const moduleRef = await Test.createTestingModule({
    imports: name === 'a' ? [ScheduleModule.forRoot(), redlock] : [redlock, ScheduleModule.forRoot()],
    providers: [ReconcileJob, { provide: REPLICA, useValue: name }],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: nestLogger });
  apps.push(app);
  await app.init();
}

describe('an @Interval job under onLocked: skip, on two replicas', () => {
  it('never overlaps, skips the ticks that find it running, and logs nothing above debug', async () => {
    Object.assign(state, { round: newRound(), history: [], active: 0, maxActive: 0 });
    const nestLogger = new RecordingLogger();
    const lockLoggers = { a: new RecordingLogger(), b: new RecordingLogger() };
    await replica('a', nestLogger, lockLoggers.a);
    await replica('b', nestLogger, lockLoggers.b);
    const skips = () => ({ a: lockLoggers.a.lines.debug.length, b: lockLoggers.b.lines.debug.length });

    const ranOn: string[] = [];
    for (let run = 0; run < 4; run++) {
      const current = state.round;
      ranOn.push(await current.started.promise);
      // This run is in its body: from now on, every tick of either replica finds the lock held.
      const atStart = skips();
      await expect.poll(() => skips().a > atStart.a && skips().b > atStart.b).toBe(true);
      state.round = newRound(); // before the gate opens: the next run must find a fresh round
      current.gate.resolve();
    }

    // One more run starts once the last one has ended and released the lock.
    ranOn.push(await state.round.started.promise);

    // Starts and ends alternate, each end on the replica of the start before it: no overlap.
    expect(state.history).toEqual([
      ...ranOn.slice(0, -1).flatMap((name) => [
        { replica: name, event: 'start' },
        { replica: name, event: 'end' },
      ]),
      { replica: ranOn.at(-1), event: 'start' },
    ]);
    expect(state.maxActive).toBe(1);
    // Skipped ticks are noted at debug level only, and name the method and the resource.
    expect(lockLoggers.a.lines.debug[0]).toBe('ReconcileJob.reconcile skipped: job:reconcile held by another owner');
    for (const logger of [nestLogger, lockLoggers.a, lockLoggers.b]) {
      expect(logger.lines.error).toEqual([]);
      expect(logger.lines.fatal).toEqual([]);
      expect(logger.lines.warn).toEqual([]);
    }
  });
});

// The first deploy: fresh masters in restart quarantine, and two jobs (an @Interval every 100 ms,
// a @Cron every second) under onLocked: 'skip'. Every tick through the pause skips; each job says
// so once at WARN and once when it runs again, and the scheduler logs no error.

const settled = { interval: deferred(), cron: deferred() };

@Injectable()
class SettlementJobs {
  @Interval(100)
  @WithLock('job:settle-interval', { onLocked: 'skip', ttlMs: 2_500 })
  async settleOften() {
    settled.interval.resolve();
  }

  @Cron('* * * * * *')
  @WithLock('job:settle-cron', { onLocked: 'skip', ttlMs: 2_500 })
  async settleEverySecond() {
    settled.cron.resolve();
  }
}

describe('onLocked: skip jobs through the restart quarantine of a first deploy', () => {
  it('skip every tick of the pause, say so once per job at WARN and once when they run, and log no error', async () => {
    const fresh = await RedisFleet.start(3);
    try {
      const nestLogger = new RecordingLogger();
      const lockLogger = new RecordingLogger();
      const moduleRef = await Test.createTestingModule({
        imports: [ScheduleModule.forRoot(), RedlockModule.forRoot({ nodes: fresh.urls(), defaultTtlMs: 1_000, ...PATIENT, logger: lockLogger })],
        providers: [SettlementJobs],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: nestLogger });
      apps.push(app);
      await app.init();
      // The bootstrap announcement: the one WARN of the module's own logger, naming the pause.
      expect(nestLogger.lines.warn).toHaveLength(1);
      expect(nestLogger.lines.warn[0]).toMatch(/^Locking paused until /);

      await Promise.all([settled.interval.promise, settled.cron.promise]);
      await app.close();
      expect(nestLogger.lines.error).toEqual([]);
      expect(nestLogger.lines.fatal).toEqual([]);
      expect(lockLogger.lines.error).toEqual([]);
      for (const job of ['settleOften', 'settleEverySecond']) {
        const warned = lockLogger.lines.warn.filter((line) => line.startsWith(`SettlementJobs.${job} skipped: `));
        expect(warned, lockLogger.lines.warn.join('\n')).toHaveLength(1);
        expect(warned[0]).toMatch(/restart quarantine/);
        expect(lockLogger.lines.log.filter((line) => line === `SettlementJobs.${job}: locks can be taken again; its calls run`)).toHaveLength(1);
      }
      // Nothing else at WARN: no per-tick line, and the engine's per-master notices went to debug.
      expect(lockLogger.lines.warn).toHaveLength(2);
      expect(nestLogger.lines.warn).toHaveLength(1);
    } finally {
      await fresh.stopAll();
    }
  });
});
