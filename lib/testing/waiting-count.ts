import type { AcquireObserver, RedlockInstrumentation } from '../core/lock/instrumentation.js';

/**
 * How many of the app's acquire calls wait for each resource now (InMemoryRedlock.waitingFor),
 * as the acquire loop tells an observer: from `waiting` (refused, or in line behind another
 * caller) to `ended`. Observed through the engine's instrumentation hooks, around the app's own.
 */
export class WaitingCount {
  readonly #counts = new Map<string, number>();

  of(resource: string): number {
    return this.#counts.get(resource) ?? 0;
  }

  /**
   * The app's hooks (none, or its `instrumentation` option), each acquire call counted here
   * first. `failed` reports a throw of the app's `acquireStarted`, as the engine's guard would.
   */
  hooks(app: RedlockInstrumentation | undefined, failed: (hook: string, error: unknown) => void): RedlockInstrumentation {
    return {
      acquireStarted: (resources, ttlMs) => {
        let observer: AcquireObserver | undefined;
        try {
          observer = app?.acquireStarted?.(resources, ttlMs);
        } catch (error) {
          failed('acquireStarted', error);
        }
        return this.#observe(resources, observer);
      },
      lockHeld: app?.lockHeld?.bind(app),
      lockReleased: app?.lockReleased?.bind(app),
      lockLost: app?.lockLost?.bind(app),
      extensionEnded: app?.extensionEnded?.bind(app),
      masterFailed: app?.masterFailed?.bind(app),
      callStarted: app?.callStarted?.bind(app),
      leadershipWon: app?.leadershipWon?.bind(app),
      leadershipEnded: app?.leadershipEnded?.bind(app),
    };
  }

  /** Counts the call while it waits; the app's observer, if any, hears everything after. */
  #observe(resources: readonly string[], app: AcquireObserver | undefined): AcquireObserver {
    let waiting = false;
    return {
      round: (granted, durationMs) => app?.round?.(granted, durationMs),
      handedOff: (granted) => app?.handedOff?.(granted),
      waiting: () => {
        waiting = true;
        this.#add(resources, 1);
        app?.waiting?.();
      },
      ended: (outcome, error, durationMs, waitedMs) => {
        if (waiting) this.#add(resources, -1);
        app?.ended?.(outcome, error, durationMs, waitedMs);
      },
    };
  }

  #add(resources: readonly string[], change: number): void {
    for (const resource of resources) {
      const count = (this.#counts.get(resource) ?? 0) + change;
      if (count > 0) this.#counts.set(resource, count);
      else this.#counts.delete(resource);
    }
  }
}
