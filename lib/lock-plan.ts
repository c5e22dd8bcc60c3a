import { Inject, Injectable } from '@nestjs/common';
import { Redlock } from './core/redlock.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import { isObservable, Observable } from 'rxjs';
import type { UsingOptions } from './core/redlock.js';
import { InstrumentationGuard } from './core/lock/instrumentation-guard.js';
import { compileLockKey, type CompiledLockKey } from './lock-key.js';
import { checkOnLocked, checkWaitTimeout, isTtl, type RedlockSettings } from './module-settings.js';
import { REDLOCK_SETTINGS, WITH_LOCK } from './redlock.constants.js';
import type { WithLockMetadata, WithLockOptions } from './redlock.interfaces.js';
import { kindOf } from './core/lock/lock-kind.js';
import { formatValue } from './core/base/errors.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';
import { SkippedCalls } from './skipped-calls.js';
import { HoldTimes } from './hold-times.js';
import { jobTicks, type JobTicks } from './job-ticks.js';

/** How one decorated method locks: its compiled key and its resolved options. */
export interface LockPlan {
  /** `ClassName.methodName`, for messages. */
  readonly site: string;
  readonly key: CompiledLockKey;
  readonly ttlMs: number;
  /** Wait policy and auto-extension, as the engine takes them. */
  readonly options: UsingOptions;
  /** Declared `Observable<...>` return type: the lock must then last while it is subscribed. */
  readonly returnsObservable: boolean;
  /** The module's `instrumentation` hooks, told of every call (`callStarted`). */
  readonly instrumentation: InstrumentationGuard | undefined;
  /** `onLocked: 'skip'`: a call that finds the lock held elsewhere does not run and yields undefined. */
  readonly skipWhenHeld: boolean;
  /** How long this method has held its lock recently: the Retry-After of its 409s. */
  readonly holds: HoldTimes;
  /** Under `onLocked: 'skip'`: where skipped calls are noted (held elsewhere at debug, masters unavailable once per episode). */
  readonly skips: SkippedCalls | undefined;
  /** `oncePerTick`: the job's ticks, each claimed by a run before it takes the lock (see job-ticks.ts). */
  readonly ticks: JobTicks | undefined;
}

/**
 * Turns `@WithLock` metadata into lock plans, checking key and options once per method and
 * module (so a mistake fails at bootstrap), with the module's defaults filled in. Shared by the
 * interceptor and the explorer; plans are cached per method function, never stored on it.
 */
@Injectable()
export class LockPlanner {
  readonly #plans = new WeakMap<Function, LockPlan>();
  #instrumentation: InstrumentationGuard | undefined;

  constructor(
    @Inject(REDLOCK_SETTINGS) private readonly settings: RedlockSettings,
    @Inject(Redlock) private readonly redlock: RedlockEngine,
  ) {}

  /** The plan of `method` as a member of `owner`, or undefined when it carries no `@WithLock`. */
  planFor(owner: Function, methodName: string, method: Function): LockPlan | undefined {
    const cached = this.#plans.get(method);
    if (cached) return cached;
    const metadata = Reflect.getMetadata(WITH_LOCK, method) as WithLockMetadata | undefined;
    if (!metadata) return undefined;
    const plan = this.compile(owner, methodName, method, metadata);
    this.#plans.set(method, plan);
    return plan;
  }

  /** One guard for the module's hooks, shared by its plans. */
  private instrumentation(): InstrumentationGuard | undefined {
    const { instrumentation: hooks, logger } = this.settings.engine;
    if (hooks && logger) this.#instrumentation ??= new InstrumentationGuard(hooks, logger);
    return this.#instrumentation;
  }

  private compile(owner: Function, methodName: string, method: Function, metadata: WithLockMetadata): LockPlan {
    const site = `${owner.name || 'anonymous class'}.${methodName}`;
    const prototype = owner.prototype as object;
    const paramTypes = Reflect.getMetadata('design:paramtypes', prototype, methodName) as unknown[] | undefined;
    const returnType = Reflect.getMetadata('design:returntype', prototype, methodName) as unknown;
    const key = compileLockKey(metadata.key, {
      name: site,
      paramCount: Math.max(method.length, paramTypes?.length ?? 0),
    });

    // Left out (undefined), an option takes its default; anything else given is checked, null included.
    const { defaultTtlMs, defaultWait, maxTtlMs } = this.settings;
    // A misspelt option (oncePerTic, ttl) would otherwise be a lock that quietly works otherwise than written.
    const unknown = Object.keys(metadata.options).filter((name) => !WITH_LOCK_OPTIONS.has(name));
    if (unknown.length > 0) {
      throw new RedlockConfigError(`@WithLock on ${site}: unknown option ${unknown.map((name) => `'${name}'`).join(', ')} (known: ${[...WITH_LOCK_OPTIONS].join(', ')})`);
    }
    const { oncePerTick = false } = metadata.options;
    if (typeof oncePerTick !== 'boolean') {
      throw new RedlockConfigError(`@WithLock on ${site}: oncePerTick must be true or false (got ${formatValue(oncePerTick)})`);
    }
    if (oncePerTick && metadata.options.onLocked !== undefined && metadata.options.onLocked !== 'skip') {
      throw new RedlockConfigError(`@WithLock on ${site}: oncePerTick skips a run whose tick another replica took; it cannot also ${metadata.options.onLocked === 'wait' ? 'wait' : 'fail'} (leave onLocked out, or 'skip')`);
    }
    const { ttlMs = defaultTtlMs, autoExtend = true, onLocked = oncePerTick ? 'skip' : defaultWait.onLocked, waitTimeoutMs = defaultWait.waitTimeoutMs } = metadata.options;
    if (!isTtl(ttlMs, maxTtlMs)) {
      throw new RedlockConfigError(`@WithLock on ${site}: ttlMs must be a positive integer number of ms, at most ${maxTtlMs} as maxTtlMs allows (got ${formatValue(ttlMs)})`);
    }
    checkOnLocked(`@WithLock on ${site}: onLocked`, onLocked);
    if (waitTimeoutMs !== undefined) checkWaitTimeout(`@WithLock on ${site}: waitTimeoutMs`, waitTimeoutMs);
    if (typeof autoExtend !== 'boolean') {
      throw new RedlockConfigError(`@WithLock on ${site}: autoExtend must be true or false (got ${formatValue(autoExtend)})`);
    }
    const kind = lockKind(site, metadata.options);
    const returnsObservable = isObservableType(returnType);
    const ticks = oncePerTick ? jobTicks(site, method, maxTtlMs) : undefined;
    if (ticks && returnsObservable) throw new RedlockConfigError(`@WithLock on ${site}: oncePerTick is for jobs that return a promise or nothing, not an Observable`);
    // Planned at bootstrap (or first call): the restart quarantine must cover this ttl from now on.
    this.redlock.expectTtl(ttlMs);
    // 'fail' and 'skip' are one round; 'wait' keeps the engine's retry settings, bounded by the wait timeout.
    const options: UsingOptions = { ...(onLocked === 'wait' ? { waitTimeoutMs, autoExtend } : { retryCount: 0, autoExtend }), ...kind };
    return {
      site,
      key,
      ttlMs,
      options,
      returnsObservable,
      instrumentation: this.instrumentation(),
      skipWhenHeld: onLocked === 'skip',
      holds: new HoldTimes(),
      skips: onLocked === 'skip' ? new SkippedCalls(site, this.settings.engine.logger) : undefined,
      ticks,
    };
  }
}

/** Every option `@WithLock` takes (WithLockOptions). */
const WITH_LOCK_OPTIONS: ReadonlySet<string> = new Set<keyof WithLockOptions>(['ttlMs', 'onLocked', 'waitTimeoutMs', 'autoExtend', 'mode', 'limit', 'permits', 'oncePerTick']);

/** `mode`, `limit` and `permits` as the engine takes them, checked at bootstrap; absent when they are the defaults. */
function lockKind(site: string, options: Readonly<WithLockOptions>): Pick<UsingOptions, 'mode' | 'limit' | 'permits'> {
  const { mode, limit, permits } = options;
  try {
    kindOf({ mode, limit, permits });
  } catch (error) {
    throw new RedlockConfigError(`@WithLock on ${site}: ${(error as Error).message}`);
  }
  return { ...(mode === undefined ? {} : { mode }), ...(limit === undefined ? {} : { limit }), ...(permits === undefined ? {} : { permits }) };
}

function isObservableType(type: unknown): boolean {
  if (typeof type !== 'function') return false;
  // Another copy of rxjs has another Observable class: recognise it by its shape.
  return type === Observable || (type.name === 'Observable' && isObservable(Object.create(type.prototype as object)));
}
