import { RedlockConfigError } from './errors/redlock-config.error.js';

/**
 * The metadata keys @nestjs/schedule puts on a `@Cron`, `@Interval` or `@Timeout` method
 * (its schedule.constants.ts, the same in versions 4 to 12). Read here rather than imported:
 * @nestjs/schedule is an optional peer, and this module loads without it.
 */
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS';
const SCHEDULE_INTERVAL_OPTIONS = 'SCHEDULE_INTERVAL_OPTIONS';
const SCHEDULE_TIMEOUT_OPTIONS = 'SCHEDULE_TIMEOUT_OPTIONS';

/** A tick of a scheduled job: what a run claims across replicas, and for how long. */
export interface Tick {
  /** Appended to each locked resource to name the tick's claim. */
  readonly suffix: string;
  /** How long the claim lives: past the time any replica may still run for this tick. */
  readonly ttlMs: number;
  /** For messages: which tick. */
  readonly label: string;
}

/**
 * How a scheduled job's runs map to ticks (docs/jobs-and-transports.md, "Once per tick"):
 *
 * - `@Cron`: wall-clock aligned. A run belongs to the tick that fired it, named by the next
 *   instant of the expression after the run starts (every replica's timer for one tick fires
 *   before that instant, however late, as long as it is less than a period late). Its claim lives
 *   until the instant after that, so a replica as much as a whole period late still finds it.
 * - `@Interval(ms)`: replicas' timers are not aligned (each counts from its own start), so a tick
 *   is a lease: a run claims the job for a little less than the interval, and runs no other
 *   replica's timer fires within it. The next timer after the lease runs the next tick.
 * - `@Timeout(ms)`: one tick per deploy: a run claims the job for its delay (at least a second),
 *   so replicas started within that time of each other run it once.
 */
export interface JobTicks {
  /** Loads what the rule needs (the cron parser); rejects with RedlockConfigError when it cannot work. */
  ready(): Promise<void>;
  /** The tick a run starting now belongs to. */
  now(): Tick;
}

/** `cron`'s CronTime, as far as a tick needs it (`cron` comes with @nestjs/schedule). */
interface CronTimeLike {
  sendAt(count: number): { toMillis(): number }[];
}
type CronTimeClass = new (source: string, timeZone?: string | null, utcOffset?: number | null) => CronTimeLike;

/** The job's ticks, from the schedule metadata on `method`; throws RedlockConfigError when it has none. */
export function jobTicks(site: string, method: Function, maxTtlMs: number): JobTicks {
  const cron = Reflect.getMetadata(SCHEDULE_CRON_OPTIONS, method) as { cronTime?: unknown; timeZone?: string; utcOffset?: number } | undefined;
  const interval = Reflect.getMetadata(SCHEDULE_INTERVAL_OPTIONS, method) as { timeout?: unknown } | undefined;
  const timeout = Reflect.getMetadata(SCHEDULE_TIMEOUT_OPTIONS, method) as { timeout?: unknown } | undefined;
  const clamp = (ms: number) => Math.min(maxTtlMs, Math.max(1, Math.round(ms)));
  if (cron) {
    if (typeof cron.cronTime !== 'string') {
      throw new RedlockConfigError(`@WithLock on ${site}: oncePerTick needs a cron expression; a @Cron given a date runs once anyway`);
    }
    return cronTicks(site, cron.cronTime, cron.timeZone, cron.utcOffset, clamp);
  }
  const every = interval?.timeout ?? timeout?.timeout;
  if (typeof every !== 'number' || !(every > 0)) {
    throw new RedlockConfigError(
      `@WithLock on ${site}: oncePerTick is for scheduled jobs; put @Cron, @Interval or @Timeout (@nestjs/schedule) on the method too`,
    );
  }
  // A replica's interval timer never fires early, so the lease may end just short of the next one;
  // the slack covers the masters' clocks and the claim's round trip.
  const ttlMs = interval ? clamp(every - Math.min(every / 10, 250)) : clamp(Math.max(every, 1_000));
  const tick: Tick = { suffix: '#tick', ttlMs, label: interval ? `the interval of ${every} ms` : 'this deploy' };
  return { ready: () => Promise.resolve(), now: () => tick };
}

function cronTicks(site: string, expression: string, timeZone: string | undefined, utcOffset: number | undefined, clamp: (ms: number) => number): JobTicks {
  let cronTime: CronTimeLike | undefined;
  return {
    async ready() {
      let CronTime: CronTimeClass;
      try {
        ({ CronTime } = (await import('cron')) as unknown as { CronTime: CronTimeClass });
      } catch {
        throw new RedlockConfigError(`@WithLock on ${site}: oncePerTick on a @Cron job needs the cron package (installed with @nestjs/schedule)`);
      }
      cronTime = timeZone ? new CronTime(expression, timeZone) : new CronTime(expression, null, utcOffset ?? null);
    },
    now() {
      const [next, after] = cronTime!.sendAt(2).map((date) => date.toMillis());
      return { suffix: `#tick:${next}`, ttlMs: clamp(after! - Date.now()), label: `the tick before ${new Date(next!).toISOString()}` };
    },
  };
}
