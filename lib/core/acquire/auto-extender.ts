import { timerDelay } from '../base/argument-checks.js';
import { LockLostError, QuorumUnreachableError } from '../base/errors.js';
import type { Lock } from '../lock/lock.js';

/**
 * Keeps a lock alive while work runs: extends it when half of `ttlMs` is left, retries a
 * quorum that was briefly unreachable while validity remains, and fires `lock.signal` when the
 * lock is lost (another owner holds the keys, the extension limit is reached, or the deadline
 * passes first). `onExtended` hears each extension that succeeded. Returns the function that stops it.
 */
export function autoExtend(lock: Lock, ttlMs: number = lock.ttlMs, onExtended?: () => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const schedule = (delayMs: number) => {
    if (stopped) return;
    // Beyond a timer's reach (a ttl over 49 days): extending early is harmless.
    timer = setTimeout(run, timerDelay(Math.floor(delayMs)));
    timer.unref();
  };

  const run = () => {
    if (stopped || lock.released) return;
    lock.extend(ttlMs).then(
      () => {
        onExtended?.();
        schedule(lock.remainingMs() - ttlMs / 2);
      },
      (error: unknown) => {
        if (stopped || lock.released) return;
        const remaining = lock.remainingMs();
        // A blip on a minority of masters or a slow round is worth another try while the lock
        // still stands; anything that says the lock is gone or capped is not.
        if (error instanceof QuorumUnreachableError && remaining > 0) {
          schedule(remaining / 2);
          return;
        }
        lock.markLost(error instanceof Error ? error : new LockLostError(lock.resources, String(error)));
      },
    );
  };

  // Arms the deadline timer, so the signal fires even if an extension never gets to run.
  void lock.signal;
  schedule(lock.remainingMs() - ttlMs / 2);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
