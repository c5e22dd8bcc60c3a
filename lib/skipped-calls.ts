import type { LockHeldError, QuorumUnreachableError } from './core/base/errors.js';
import type { RedlockLogger } from './core/lock/redlock-options.js';
import type { Tick } from './job-ticks.js';
import { debugOf } from './module-settings.js';

/**
 * What an `onLocked: 'skip'` method says about the calls it skips, in the module's logger.
 *
 * Held elsewhere: at debug, each time; on every other replica that is the expected outcome of a
 * tick. Too few masters (down, or in restart quarantine after a deploy): at WARN once per
 * episode, and once more when a lock is taken again. A job ticking every 300 ms through a
 * 30 s quarantine would otherwise log a hundred errors with stacks, which read as a crash; and
 * once per episode is still enough that a job cannot stop running while Redis is down unnoticed.
 */
export class SkippedCalls {
  /** The episode of unavailability under way, if any: its first skip has been reported. */
  #unavailable = false;
  readonly #debug: ((message: string) => void) | undefined;

  constructor(
    /** `ClassName.methodName`. */
    private readonly site: string,
    private readonly logger: RedlockLogger | undefined,
  ) {
    this.#debug = debugOf(logger);
  }

  /**
   * Another owner holds the lock. Where masters answered so, any episode of unavailability is
   * over; refused in this process (an earlier call of it still asks or holds: no master was
   * asked), it goes on. On a loaded machine a tick's call can overlap the one before, still
   * waiting for its quarantined masters' answer: that is no recovery, and the next tick's
   * failure would warn a second time in one episode.
   */
  heldElsewhere(error: LockHeldError): void {
    if (error.nodes.length > 0) this.recovered();
    this.#debug?.(`${this.site} skipped: ${error.resources.join(', ')} held by another owner`);
  }

  /** The application is shutting down: the call's acquire was given up (releaseAll). */
  shuttingDown(): void {
    this.#debug?.(`${this.site} skipped: the application is shutting down`);
  }

  /** `oncePerTick`: this tick was claimed already (by another replica, or an earlier run here). */
  tickTaken(tick: Tick): void {
    this.recovered();
    this.#debug?.(`${this.site} skipped: ${tick.label} has run already`);
  }

  /** Too few masters voted: said at the first skip of an episode only. */
  unavailable(error: QuorumUnreachableError): void {
    if (this.#unavailable) return;
    this.#unavailable = true;
    this.logger?.warn(
      `${this.site} skipped: the lock on ${error.resources.join(', ')} cannot be taken: ${error.message}. ` +
        'Its calls skip until a lock can be taken again; said once, and again when one is',
    );
  }

  /** The lock was taken (or found held, so masters answer): ends an episode, said once. */
  recovered(): void {
    if (!this.#unavailable) return;
    this.#unavailable = false;
    const log = (this.logger as { log?: (message: string) => void } | undefined)?.log;
    const message = `${this.site}: locks can be taken again; its calls run`;
    if (typeof log === 'function') log.call(this.logger, message);
    else this.logger?.warn(message);
  }
}
