import { setTimeout as sleep } from 'node:timers/promises';
import { LockHeldError, QuorumUnreachableError, type RedlockError } from './errors.js';
import type { WaitOptions } from './redlock-options.js';
import type { Lock } from './lock.js';
import type { ReleaseWakeups } from './release-wakeups.js';
import { PROCESS_ID } from './token.js';

let sequence = 0;

/**
 * One acquire call's place in line: the identity and ticket it queues under on every master,
 * and the pause between its rounds. While the lock is held it sleeps until a release names it
 * (or anyone), with a fallback timer for a crashed holder or a lost message; masters in restart
 * quarantine it waits out exactly; for other failures it backs off with jitter.
 */
export class Waiter {
  /** Unique across processes; '' for a caller that does not queue (tryAcquire). */
  readonly id: string;
  /** Chosen once, sent to every master, so all masters order waiters alike. */
  readonly ticket: number;
  /** Refused at least once, so the masters may hold a queue entry of ours that a release must clear. */
  enlisted = false;
  #handed: Lock | undefined;
  #sleeping = false;
  #woken = false;
  #wake: (() => void) | undefined;
  #stopListening: (() => void) | undefined;
  #listening = false;

  constructor(
    queues: boolean,
    private readonly wakeups: ReleaseWakeups | undefined,
    private readonly channels: readonly string[],
    private readonly wait: Required<WaitOptions>,
    private readonly signal: AbortSignal | undefined,
  ) {
    sequence = (sequence + 1) % 1_000_000;
    this.id = queues ? `${PROCESS_ID}:${sequence}` : '';
    // Wall-clock ticket: the only clock every process shares. Skew between clients only costs
    // fairness, never safety. Microsecond slots keep tickets of one process apart.
    this.ticket = Date.now() * 1000 + (sequence % 1000);
  }

  /** Waits before the next round; resolves at once after first subscribing, to cover a release in between. */
  async pause(error: RedlockError, leftMs: number): Promise<void> {
    if (error instanceof QuorumUnreachableError && error.retryAfterMs !== undefined) {
      // Masters in restart quarantine vote again at a known time: asking before is pointless.
      await sleep(Math.min(leftMs, error.retryAfterMs), undefined, { signal: this.signal });
      return;
    }
    if (!(error instanceof LockHeldError) || !this.wakeups) {
      await sleep(Math.min(leftMs, this.wait.retryDelayMs + Math.random() * this.wait.retryJitterMs), undefined, {
        signal: this.signal,
      });
      return;
    }
    if (!this.#listening) {
      this.#listening = true;
      this.#stopListening = await this.wakeups.listen(this.channels, (next) => {
        if (next === '' || next === this.id) this.#woken = true;
        if (this.#woken) this.#wake?.();
      });
      return;
    }
    const fallback = (error.retryAfterMs ?? this.wait.retryDelayMs) + Math.random() * this.wait.retryJitterMs;
    await this.#sleepUntilWoken(Math.min(leftMs, fallback));
  }

  /**
   * Sleeps without asking the masters, while a caller of this process holds the lock: it will
   * hand the lock over or wake this waiter when it releases; `ms` bounds the wait in case it
   * never does (a lock that is lost and never released).
   */
  async standBy(ms: number): Promise<void> {
    await this.#sleepUntilWoken(ms);
  }

  /** Ends a sleep at once: the lock was just released by a caller of this process. */
  wakeNow(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /** A lock another caller of this process handed over while we slept, if any. */
  get handed(): Lock | undefined {
    return this.#handed;
  }

  /**
   * Takes over a lock released by a caller of this process, for the same resources, while this
   * waiter sleeps for its turn: false when it is not asleep (then the lock is released as usual).
   */
  offer(lock: Lock): boolean {
    if (!this.#sleeping || this.#handed || this.signal?.aborted) return false;
    this.#handed = lock;
    this.#woken = true;
    this.#wake?.();
    return true;
  }

  close(): void {
    this.#stopListening?.();
  }

  /**
   * A plain timer and promise rather than timers/promises with an AbortController: aborting
   * that costs two DOMExceptions with stack traces, 40 to 100 µs that would sit between one
   * holder's release and the next holder's start on every wake-up and hand-over.
   */
  async #sleepUntilWoken(ms: number): Promise<void> {
    if (!this.#woken) {
      this.#sleeping = true;
      try {
        await new Promise<void>((resolve, reject) => {
          const finish = (aborted: boolean) => {
            clearTimeout(timer);
            this.signal?.removeEventListener('abort', onAbort);
            this.#wake = undefined;
            if (aborted) reject(this.signal!.reason);
            else resolve();
          };
          // A lock handed over just as the caller gave up is still ours to release: keep it.
          const onAbort = () => finish(!this.#handed);
          const timer = setTimeout(() => finish(false), Math.max(0, ms));
          this.#wake = () => finish(false);
          if (this.signal?.aborted) onAbort();
          else this.signal?.addEventListener('abort', onAbort, { once: true });
        });
      } finally {
        this.#sleeping = false;
      }
    }
    this.#woken = false;
  }
}
