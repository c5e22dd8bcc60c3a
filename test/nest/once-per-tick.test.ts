import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Injectable } from '@nestjs/common';
import { Cron, Interval, ScheduleModule, Timeout } from '@nestjs/schedule';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockConfigError, RedlockModule, WithLock, type WithLockOptions } from '../../lib/index.js';
import { closeAll, createApp, fleetOptions } from './nest-helpers.js';
import { forkApp, type AppProcess } from '../support/app-process.js';
import { RedisFleet } from '../support/redis-fleet.js';
import type { TickAppConfig, TickRun } from './support/tick-app.js';

const APP = fileURLToPath(new URL('./support/tick-app.ts', import.meta.url));

/** How long the replicas run: short in `npm test`; TICK_TEST_SECONDS=75 for the long run (docs/SAFETY.md). */
const RUN_SECONDS = Number(process.env['TICK_TEST_SECONDS'] ?? 9);
const INTERVAL_MS = 1_000;
/** What job-ticks.ts leases an interval job's tick for. */
const LEASE_MS = INTERVAL_MS - Math.min(INTERVAL_MS / 10, 250);
/** The third replica's clock is this far behind: its cron timers fire that much late. */
const SKEW_MS = 300;
/** Runs this close to the replicas' start or stop are left out: a tick there may have had fewer replicas up. */
const EDGE_MS = 1_500;

let fleet: RedisFleet;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(() => closeAll());

afterAll(async () => {
  await fleet?.stopAll();
});

function startReplica(config: TickAppConfig, runs: TickRun[]): AppProcess {
  return forkApp<TickRun>(APP, config, `replica ${config.replica}`, (run) => runs.push(run));
}

/** Per tick id, how many runs of `job` it had, for the ticks strictly inside [from, to] (monotonic ms). */
function runsPerTick(runs: readonly TickRun[], job: TickRun['job'], from: number, to: number): Map<number, number> {
  const inside = runs.filter((run) => run.job === job && run.at >= from && run.at <= to);
  const ticks = inside.map((run) => run.tick);
  const counts = new Map<number, number>();
  // Every second between the first and the last tick seen: a tick nobody ran counts 0.
  for (let tick = Math.min(...ticks); tick <= Math.max(...ticks); tick++) counts.set(tick, 0);
  for (const tick of ticks) counts.set(tick, counts.get(tick)! + 1);
  return counts;
}

/** The gaps between consecutive runs of `job` inside [from, to], in ms. */
function gaps(runs: readonly TickRun[], job: TickRun['job'], from: number, to: number): number[] {
  const times = runs.filter((run) => run.job === job && run.at >= from && run.at <= to).map((run) => run.at).sort((a, b) => a - b);
  return times.slice(1).map((at, i) => at - times[i]!);
}

/**
 * Per two consecutive calls of `job` inside [from, to] (by when they began), the longest two of
 * their ticks' claims can have been apart: each call claimed its tick between its start and its
 * run, so from the earlier start to the later run. Runs alone do not bound the claims: on a loaded
 * machine a run can come hundreds of ms after its claim (the job lock's own round comes between).
 */
function claimSpans(runs: readonly TickRun[], job: TickRun['job'], from: number, to: number): number[] {
  const calls = runs.filter((run) => run.job === job && run.at >= from && run.at <= to).sort((a, b) => a.startedAt - b.startedAt);
  return calls.slice(1).map((later, i) => Math.max(later.at, calls[i]!.at) - calls[i]!.startedAt);
}

/** What the long run writes (TICK_TEST_REPORT=<file>) for docs/SAFETY.md: per job, ticks and runs. */
function summary(runs: readonly TickRun[], from: number, to: number) {
  const perTick = (job: TickRun['job']) => {
    const counts = [...runsPerTick(runs, job, from, to).values()];
    return { ticks: counts.length, runs: counts.reduce((a, b) => a + b, 0), ticksNotOnce: counts.filter((c) => c !== 1).length, mostRuns: Math.max(...counts) };
  };
  const spacing = (job: TickRun['job']) => {
    const g = gaps(runs, job, from, to);
    return { runs: g.length + 1, shortestGapMs: Math.round(Math.min(...g)), longestGapMs: Math.round(Math.max(...g)), underLease: g.filter((gap) => gap < LEASE_MS - 100).length };
  };
  const byReplica = (job: TickRun['job']) => Object.fromEntries(['a', 'b', 'c'].map((r) => [r, runs.filter((run) => run.job === job && run.replica === r && run.at >= from && run.at <= to).length]));
  return {
    windowSeconds: Math.round((to - from) / 1000),
    cron: { ...perTick('cron'), byReplica: byReplica('cron') },
    cronControl: perTick('cron-control'),
    interval: { ...spacing('interval'), byReplica: byReplica('interval') },
    intervalControl: spacing('interval-control'),
  };
}

describe('oncePerTick on @nestjs/schedule jobs, three replicas, one with its clock 300 ms behind', () => {
  it('runs each tick exactly once, where onLocked: skip alone runs most ticks on several replicas', async () => {
    const runs: TickRun[] = [];
    const replicas = ['a', 'b', 'c'].map((replica, index) =>
      startReplica({ nodes: fleet.urls(), replica, skewMs: index === 2 ? SKEW_MS : 0, intervalMs: INTERVAL_MS }, runs),
    );
    try {
      await Promise.all(replicas.map((replica) => replica.ready));
      const from = Number(process.hrtime.bigint()) / 1e6 + EDGE_MS;
      await sleep(RUN_SECONDS * 1000);
      const to = Number(process.hrtime.bigint()) / 1e6 - EDGE_MS;

      // Cron, wall-clock ticks: one run per second, whoever's timer fired first.
      const cron = runsPerTick(runs, 'cron', from, to);
      const report = process.env['TICK_TEST_REPORT'];
      if (report) writeFileSync(report, JSON.stringify(summary(runs, from, to), null, 2));
      expect(cron.size).toBeGreaterThanOrEqual(RUN_SECONDS - 4);
      expect([...cron].filter(([, count]) => count !== 1)).toEqual([]);
      // The control: the job is over in a millisecond, so the late replica's run finds the lock free.
      const control = runsPerTick(runs, 'cron-control', from, to);
      expect([...control.values()].filter((count) => count > 1).length).toBeGreaterThan(control.size / 2);

      // Interval, a lease per tick: claims at least the lease apart (less the claim's round
      // trips), so no two calls that ran had their claims closer, and no interval left without a
      // run (a missed tick leaves two intervals between runs; a late timer, under load, a few
      // hundred ms more than one).
      const interval = gaps(runs, 'interval', from, to);
      expect(interval.length).toBeGreaterThanOrEqual(((to - from) / INTERVAL_MS) * 0.6);
      expect(claimSpans(runs, 'interval', from, to).filter((span) => span < LEASE_MS - 100)).toEqual([]);
      expect(interval.filter((gap) => gap >= 1.8 * INTERVAL_MS)).toEqual([]);
      // The control: three replicas' timers, spread over the interval, each run.
      expect(gaps(runs, 'interval-control', from, to).filter((gap) => gap < LEASE_MS - 100).length).toBeGreaterThan(interval.length / 2);
    } finally {
      for (const replica of replicas) replica.child.send('stop');
      await Promise.race([Promise.all(replicas.map((replica) => replica.exited)), sleep(5_000)]);
      for (const replica of replicas) replica.child.kill('SIGKILL');
    }
  }, (RUN_SECONDS + 60) * 1000);
});

describe('oncePerTick bootstrap checks', () => {
  /** The bootstrap error of an app whose one job has `@WithLock('job', options)` and `schedule` (a decorator or none). */
  async function bootError(options: WithLockOptions, schedule?: MethodDecorator): Promise<unknown> {
    @Injectable()
    class Job {
      @WithLock('job', options)
      run() {}
    }
    if (schedule) schedule(Job.prototype, 'run', Object.getOwnPropertyDescriptor(Job.prototype, 'run')!);
    return createApp({ imports: [ScheduleModule.forRoot(), RedlockModule.forRoot(fleetOptions(fleet))], providers: [Job] }).then(
      () => undefined,
      (error: unknown) => error,
    );
  }

  it('starts a job with @Cron, @Interval or onLocked: skip', async () => {
    expect(await bootError({ oncePerTick: true }, Cron('*/5 * * * * *'))).toBeUndefined();
    expect(await bootError({ oncePerTick: true, onLocked: 'skip' }, Interval(60_000))).toBeUndefined();
  });

  it('refuses it on a method with no schedule, one that would wait or fail, a misspelt option and a non-boolean', async () => {
    const noSchedule = await bootError({ oncePerTick: true });
    expect(noSchedule).toBeInstanceOf(RedlockConfigError);
    expect((noSchedule as Error).message).toMatch(/@WithLock on Job\.run: oncePerTick is for scheduled jobs; put @Cron, @Interval or @Timeout/);
    const waits = await bootError({ oncePerTick: true, onLocked: 'wait' }, Interval(60_000));
    expect((waits as Error).message).toMatch(/oncePerTick skips a run whose tick another replica took; it cannot also wait/);
    const misspelt = await bootError({ oncePerTic: true } as WithLockOptions, Interval(60_000));
    expect((misspelt as Error).message).toMatch(/@WithLock on Job\.run: unknown option 'oncePerTic' \(known: ttlMs, onLocked, waitTimeoutMs, autoExtend, mode, limit, permits, oncePerTick\)/);
    const notBoolean = await bootError({ oncePerTick: 'yes' as unknown as boolean }, Interval(60_000));
    expect((notBoolean as Error).message).toMatch(/oncePerTick must be true or false \(got .yes.\)/);
  });
});

describe('oncePerTick on a @Timeout job', () => {
  it('runs it once for replicas started within its delay, where onLocked: skip alone runs it on each', async () => {
    const runs: string[] = [];
    let ran: (() => void) | undefined;
    @Injectable()
    class StartupJob {
      @Timeout(50)
      @WithLock('job:startup', { oncePerTick: true })
      async warm() {
        runs.push('once');
        ran?.();
      }

      @Timeout(50)
      @WithLock('job:startup-control', { onLocked: 'skip' })
      async warmControl() {
        runs.push('control');
      }
    }
    const debug: string[] = [];
    const logger = { warn: () => {}, debug: (message: string) => debug.push(message) };
    const app = () => createApp({ imports: [ScheduleModule.forRoot(), RedlockModule.forRoot({ ...fleetOptions(fleet), logger })], providers: [StartupJob] });
    const first = new Promise<void>((resolve) => (ran = resolve));
    await app();
    await first;
    // The second replica starts once the first has run and released the job's lock: only the claim keeps it from running again.
    await app();
    await expect.poll(() => debug).toContain('StartupJob.warm skipped: this deploy has run already');
    await expect.poll(() => runs.filter((run) => run === 'control').length).toBe(2);
    expect(runs.filter((run) => run === 'once')).toEqual(['once']);
  });
});
