import { from, isObservable, Observable, type Subscription } from 'rxjs';
import type { Redlock } from './core/redlock.js';
import type { LockSession } from './core/lock-session.js';
import type { LockPlan } from './lock-plan.js';

/**
 * Runs one call of a decorated method under its lock, for work that ends with a promise (or a
 * plain value): acquire, run inside the lock's async context (so nested requests for the same
 * resources are reentrant), release however it ends.
 */
export async function runLocked<T>(redlock: Redlock, plan: LockPlan, args: readonly unknown[], invoke: () => T): Promise<Awaited<T>> {
  const resources = plan.key.resolve(args);
  return redlock.using<Awaited<T>>(resources, plan.ttlMs, async (): Promise<Awaited<T>> => await invoke(), plan.options);
}

export interface ObserveLockedOptions {
  /** What to emit instead of an acquisition failure (the interceptor's HTTP mapping). */
  mapAcquireError?: (error: unknown) => unknown;
}

/**
 * The same for work that is an Observable: the lock is acquired on subscription and held until
 * the source completes, errors, or the subscriber unsubscribes. Completion and errors are
 * passed on only after the release, so whoever sees the end can count on the lock being free.
 */
export function observeLocked<T>(
  redlock: Redlock,
  plan: LockPlan,
  args: readonly unknown[],
  invoke: () => Observable<T> | Promise<T> | T,
  options: ObserveLockedOptions = {},
): Observable<T> {
  return new Observable<T>((subscriber) => {
    let session: LockSession | undefined;
    let inner: Subscription | undefined;
    let unsubscribed = false;

    const enter = async () => redlock.enter(plan.key.resolve(args), plan.ttlMs, plan.options);
    enter().then(
      (entered) => {
        session = entered;
        if (unsubscribed) {
          void entered.exit();
          return;
        }
        const release = (then: () => void) => void entered.exit().then(then, then);
        // Subscribing inside the session is what puts the work (Nest runs the handler on
        // subscription) in the lock's async context.
        entered.run(() => {
          try {
            const result = invoke();
            const source = isObservable(result) ? (result as Observable<T>) : from(Promise.resolve(result));
            inner = source.subscribe({
              next: (value) => subscriber.next(value),
              error: (error: unknown) => release(() => subscriber.error(error)),
              complete: () => release(() => subscriber.complete()),
            });
          } catch (error) {
            release(() => subscriber.error(error));
          }
        });
      },
      (error: unknown) => subscriber.error(mapError(error, options.mapAcquireError)),
    );

    return () => {
      unsubscribed = true;
      inner?.unsubscribe();
      void session?.exit();
    };
  });
}

/** A mapper that throws has still decided what the subscriber gets: its own error. */
function mapError(error: unknown, map: ((error: unknown) => unknown) | undefined): unknown {
  if (!map) return error;
  try {
    return map(error);
  } catch (thrown) {
    return thrown;
  }
}
