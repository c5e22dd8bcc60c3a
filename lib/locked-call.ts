import { from, isObservable, Observable, type Subscription } from 'rxjs';
import { LockHeldError } from './core/base/errors.js';
import type { GuardedCall } from './core/lock/instrumentation-guard.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import type { LockSession } from './core/acquire/lock-session.js';
import type { LockPlan } from './lock-plan.js';

/**
 * Runs one call of a decorated method under its lock, for work that ends with a promise (or a
 * plain value): acquire, run inside the lock's async context (so nested requests for the same
 * resources are reentrant), release however it ends. Under `onLocked: 'skip'` a call that finds
 * the lock held elsewhere resolves to undefined without running.
 */
export async function runLocked<T>(
  redlock: RedlockEngine,
  plan: LockPlan,
  args: readonly unknown[],
  invoke: () => T,
): Promise<Awaited<T> | undefined> {
  const call = plan.instrumentation?.callStarted(plan.site);
  if (!call && !plan.skipWhenHeld) {
    const resources = plan.key.resolve(args);
    return redlock.using<Awaited<T>>(resources, plan.ttlMs, async (): Promise<Awaited<T>> => await invoke(), plan.options);
  }
  let ran = false;
  const locked = () =>
    redlock.using<Awaited<T>>(plan.key.resolve(args), plan.ttlMs, async (): Promise<Awaited<T>> => {
      ran = true;
      return await invoke();
    }, plan.options);
  try {
    // In the call's context: the acquire (and the method) see the call's span as their parent.
    const result = await (call ? call.run(locked) : locked());
    call?.ended('ran');
    return result;
  } catch (error) {
    // Only our own acquire is skipped: a LockHeldError the method itself threw is its outcome.
    if (!ran && isSkip(plan, error)) return skipped(plan, call, error);
    call?.ended(ran ? 'threw' : 'not_locked', error);
    throw error;
  }
}

function isSkip(plan: LockPlan, error: unknown): error is LockHeldError {
  return plan.skipWhenHeld && error instanceof LockHeldError;
}

/**
 * The one place a decorated call's outcome is known to be 'skipped' (held elsewhere under
 * `onLocked: 'skip'`), for both kinds of call: counted by the instrumentation hooks, noted at
 * debug level, never above (on every other replica it is the expected outcome of a tick).
 */
function skipped(plan: LockPlan, call: GuardedCall | undefined, error: LockHeldError): undefined {
  call?.ended('skipped');
  plan.debug?.(`${plan.site} skipped: ${error.resources.join(', ')} held by another owner`);
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
    const call = plan.instrumentation?.callStarted(plan.site);

    const enter = async () => redlock.enter(plan.key.resolve(args), plan.ttlMs, plan.options);
    // In the call's context: the acquire and the handler see the call's span as their parent.
    const start = () => enter().then(
      (entered) => {
        session = entered;
        if (unsubscribed) {
          void entered.exit();
          return;
        }
        const release = (then: () => void) => void entered.exit().then(then, then);
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
        if (isSkip(plan, error)) {
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
