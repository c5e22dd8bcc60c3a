import { from, isObservable, Observable, type Subscription } from 'rxjs';
import { AcquireAbortedError, LockHeldError, QuorumUnreachableError } from './core/base/errors.js';
import type { GuardedCall } from './core/lock/instrumentation-guard.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import type { LockSession } from './core/acquire/lock-session.js';
import type { Tick } from './job-ticks.js';
import type { LockPlan } from './lock-plan.js';

/**
 * Runs one call of a decorated method under its lock, for work that ends with a promise (or a
 * plain value): acquire, run inside the lock's async context (so nested requests for the same
 * resources are reentrant), release however it ends. Under `onLocked: 'skip'` a call that finds
 * the lock held elsewhere, or too few masters voting (down, or in restart quarantine), resolves
 * to undefined without running: it is a provider's method, a job's tick, and the next one tries again.
 */
export async function runLocked<T>(
  redlock: RedlockEngine,
  plan: LockPlan,
  args: readonly unknown[],
  invoke: () => T,
): Promise<Awaited<T> | undefined> {
  const call = plan.instrumentation?.callStarted(plan.site);
  let ran = false;
  /** `oncePerTick`: set when the run's tick had been claimed already, and the run skipped. */
  let taken: Tick | undefined;
  const locked = async () => {
    const resources = plan.key.resolve(args);
    // The tick first, then the job's lock: a call whose tick was taken never holds the job's lock,
    // so it cannot make the call that claims the next tick find it held and skip.
    const tick = plan.ticks?.now();
    if (tick && !(await redlock.claim(resources.map((resource) => resource + tick.suffix), tick.ttlMs))) {
      taken = tick;
      return undefined;
    }
    return redlock.using<Awaited<T>>(resources, plan.ttlMs, async (): Promise<Awaited<T>> => {
      ran = true;
      plan.skips?.recovered();
      const held = plan.holds.start();
      try {
        return await invoke();
      } finally {
        held();
      }
    }, plan.options);
  };
  try {
    // In the call's context: the acquire (and the method) see the call's span as their parent.
    const result = await (call ? call.run(locked) : locked());
    if (taken) {
      call?.ended('skipped');
      plan.skips?.tickTaken(taken);
      return undefined;
    }
    call?.ended('ran');
    return result as Awaited<T>;
  } catch (error) {
    // Only our own acquire is skipped (or told when to retry): a LockHeldError the method itself threw is its outcome.
    if (!ran && error instanceof LockHeldError) plan.holds.annotate(error);
    if (!ran && isSkip(plan, error, true)) return skipped(plan, call, error);
    call?.ended(ran ? 'threw' : 'not_locked', error);
    throw error;
  }
}

/**
 * Whether our own acquire's failure skips the call: held elsewhere, and with `unavailableToo` (a
 * provider's method: a job) too few masters, or the application shutting down (releaseAll gives
 * up the acquires in flight: a tick that fires as the app closes is skipped, not an error).
 */
function isSkip(plan: LockPlan, error: unknown, unavailableToo: boolean): error is LockHeldError | QuorumUnreachableError | AcquireAbortedError {
  if (!plan.skipWhenHeld) return false;
  return error instanceof LockHeldError || (unavailableToo && (error instanceof QuorumUnreachableError || error instanceof AcquireAbortedError));
}

/**
 * The one place a decorated call is skipped under `onLocked: 'skip'`, for both kinds of call.
 * Held elsewhere is the outcome 'skipped' for the instrumentation hooks, noted at debug level
 * (on every other replica it is the expected outcome of a tick); too few masters is 'not_locked'
 * with its error, for metrics, and a WARN once per episode (SkippedCalls), never one per tick.
 */
function skipped(plan: LockPlan, call: GuardedCall | undefined, error: LockHeldError | QuorumUnreachableError | AcquireAbortedError): undefined {
  if (error instanceof LockHeldError) {
    call?.ended('skipped');
    plan.skips?.heldElsewhere(error);
  } else if (error instanceof AcquireAbortedError) {
    call?.ended('cancelled', error);
    plan.skips?.shuttingDown();
  } else {
    call?.ended('not_locked', error);
    plan.skips?.unavailable(error);
  }
  return undefined;
}

export interface ObserveLockedOptions {
  /**
   * What to emit instead of an acquisition failure (the interceptor's mapping to the transport's
   * error), or a promise of it (a transport's exception class is loaded when first needed).
   */
  mapAcquireError?: (error: unknown) => unknown;
  /**
   * A skipped call emits undefined before completing: a handler's reply (Nest answers with the
   * last value). Otherwise (a provider's Observable) it completes without a value.
   */
  emitOnSkip?: boolean;
  /**
   * Under `onLocked: 'skip'`, too few masters voting skips the call too (a provider's method, as
   * `runLocked` does). Not for a handler a client waits on: it answers with the transport's error.
   */
  skipWhenUnavailable?: boolean;
}

/**
 * The same for work that is an Observable: the lock is acquired on subscription and held until
 * the source completes, errors, or the subscriber unsubscribes. Completion and errors are
 * passed on only after the release, so whoever sees the end can count on the lock being free.
 */
export function observeLocked<T>(
  redlock: RedlockEngine,
  plan: LockPlan,
  args: readonly unknown[],
  invoke: () => Observable<T> | Promise<T> | T,
  options: ObserveLockedOptions = {},
): Observable<T> {
  return new Observable<T>((subscriber) => {
    let session: LockSession | undefined;
    let inner: Subscription | undefined;
    let unsubscribed = false;
    /** Ends the timing of this hold (HoldTimes), once the lock is taken. */
    let held: (() => void) | undefined;
    const call = plan.instrumentation?.callStarted(plan.site);

    const enter = async () => redlock.enter(plan.key.resolve(args), plan.ttlMs, plan.options);
    // In the call's context: the acquire and the handler see the call's span as their parent.
    const start = () => enter().then(
      (entered) => {
        session = entered;
        plan.skips?.recovered();
        if (unsubscribed) {
          void entered.exit();
          return;
        }
        held = plan.holds.start();
        const release = (then: () => void) => {
          held?.();
          void entered.exit().then(then, then);
        };
        const fail = (error: unknown) =>
          release(() => {
            call?.ended('threw', error);
            subscriber.error(error);
          });
        const complete = () =>
          release(() => {
            call?.ended('ran');
            subscriber.complete();
          });
        // Subscribing inside the session is what puts the work (Nest runs the handler on
        // subscription) in the lock's async context.
        entered.run(() => {
          try {
            const result = invoke();
            const source = isObservable(result) ? (result as Observable<T>) : from(Promise.resolve(result));
            inner = source.subscribe({ next: (value) => subscriber.next(value), error: fail, complete });
          } catch (error) {
            fail(error);
          }
        });
      },
      (error: unknown) => {
        if (error instanceof LockHeldError) plan.holds.annotate(error);
        if (isSkip(plan, error, options.skipWhenUnavailable ?? false)) {
          skipped(plan, call, error);
          if (options.emitOnSkip) subscriber.next(undefined as T);
          subscriber.complete();
          return;
        }
        call?.ended('not_locked', error);
        void mapError(error, options.mapAcquireError).then((mapped) => subscriber.error(mapped));
      },
    );
    if (call) call.run(start);
    else void start();

    return () => {
      // After an end reported above this changes nothing: only the first end counts.
      call?.ended('cancelled');
      unsubscribed = true;
      held?.();
      inner?.unsubscribe();
      void session?.exit();
    };
  });
}

/** A mapper that throws (or rejects) has still decided what the subscriber gets: its own error. */
async function mapError(error: unknown, map: ((error: unknown) => unknown) | undefined): Promise<unknown> {
  if (!map) return error;
  try {
    return await map(error);
  } catch (thrown) {
    return thrown;
  }
}
