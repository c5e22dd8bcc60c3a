/**
 * A replica of a Nest app with four scheduled jobs for test/nest/once-per-tick.test.ts: a cron
 * job and an interval job with `oncePerTick`, and the same two with `onLocked: 'skip'` alone (the
 * control). Every run is reported to the parent over IPC: which job, which replica, the tick by
 * this replica's clock, and when on the machine's monotonic clock.
 *
 * `skewMs` sets this replica's wall clock that far behind: its cron timers fire that much late,
 * and it computes its ticks on that clock, as a replica with a lagging clock would.
 */
import 'reflect-metadata';
import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cron, Interval, ScheduleModule } from '@nestjs/schedule';
import { RedlockModule, WithLock } from '../../../lib/index.js';

export interface TickAppConfig {
  nodes: string[];
  replica: string;
  skewMs: number;
  intervalMs: number;
}

export interface TickRun {
  job: 'cron' | 'cron-control' | 'interval' | 'interval-control';
  replica: string;
  /** The second of the run by this replica's clock: its cron tick. */
  tick: number;
  /** CLOCK_MONOTONIC, one clock for every process on the machine (ms). */
  at: number;
  /**
   * When the run's call began (the instrumentation's `callStarted`), on the same clock: its tick
   * was claimed between then and `at`, with whatever a loaded machine put in between.
   */
  startedAt: number;
}

const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;
/** Each call's start, in the call's own async context (the call observer's `run`). */
const callStart = new AsyncLocalStorage<number>();

const config = JSON.parse(process.argv[2]!) as TickAppConfig;
if (config.skewMs) {
  const realNow = Date.now.bind(Date);
  // Luxon (and so cron) reads Date.now() at every call: the whole schedule runs on this clock.
  Date.now = () => realNow() - config.skewMs;
}

function report(job: TickRun['job']): Promise<void> {
  const run: TickRun = { job, replica: config.replica, tick: Math.floor(Date.now() / 1000), at: monotonicMs(), startedAt: callStart.getStore()! };
  process.send!(run);
  // A job of about a millisecond: over long before another replica's timer fires.
  return sleep(1);
}

@Injectable()
class Jobs {
  @Cron('* * * * * *')
  @WithLock('tick:cron', { oncePerTick: true })
  cron() {
    return report('cron');
  }

  @Cron('* * * * * *')
  @WithLock('tick:cron-control', { onLocked: 'skip' })
  cronControl() {
    return report('cron-control');
  }

  @Interval(config.intervalMs)
  @WithLock('tick:interval', { oncePerTick: true })
  interval() {
    return report('interval');
  }

  @Interval(config.intervalMs)
  @WithLock('tick:interval-control', { onLocked: 'skip' })
  intervalControl() {
    return report('interval-control');
  }
}

@Module({
  imports: [
    ScheduleModule.forRoot(),
    RedlockModule.forRoot({
      nodes: config.nodes,
      restartQuarantineMs: false,
      logger: { warn: () => {} },
      instrumentation: {
        callStarted: () => {
          const startedAt = monotonicMs();
          return { run: (work) => callStart.run(startedAt, work) };
        },
      },
    }),
  ],
  providers: [Jobs],
})
class TickAppModule {}

const app = await NestFactory.createApplicationContext(TickAppModule, { logger: false });
process.on('message', (message) => {
  if (message === 'stop') void app.close().then(() => process.exit(0));
});
process.send!('ready');
