import { describe, expect, it, vi } from 'vitest';
import type { LockEngine } from '../../lib/core/lock/lock.js';
import { LocalHandOver } from '../../lib/core/waiting/local-hand-over.js';
import { LocalQueue } from '../../lib/core/waiting/local-queue.js';
import { Waiter } from '../../lib/core/waiting/waiter.js';

// Whom a real release wakes in its own process. Where releases name the masters' next waiter
// (hand-off on), a head already queued on the masters is left to them: woken here it would send
// a round the masters refuse whenever their next waiter is another process's, on that waiter's path.

const WAIT = { retryCount: Infinity, waitTimeoutMs: 60_000, retryDelayMs: 50, retryJitterMs: 0 };

/** A head asleep on `line` until the returned `wake` ends its sleep; `woken` counts wakeNow calls. */
function sleepingHead(handOver: LocalHandOver, line: string, enlisted: boolean) {
  const waiter = new Waiter(true, undefined, [line], WAIT, undefined);
  waiter.enlisted = enlisted;
  let wake!: () => void;
  const asleep = handOver.asleep(line, waiter, () => new Promise<void>((resolve) => (wake = resolve)));
  const wakeNow = vi.spyOn(waiter, 'wakeNow').mockImplementation(() => {});
  return { wakeNow, end: () => (wake(), asleep) };
}

describe('after a real release, the next caller of this process', () => {
  const handOver = () => new LocalHandOver({} as LockEngine, new LocalQueue());

  it('queued on the masters, is left for them to name when releases name the next waiter', async () => {
    const local = handOver();
    const head = sleepingHead(local, 'k', true);
    local.wakeNext('k', true);
    expect(head.wakeNow).not.toHaveBeenCalled();
    // Without hand-off a release names nobody: the head goes to ask at once.
    local.wakeNext('k', false);
    expect(head.wakeNow).toHaveBeenCalledTimes(1);
    await head.end();
  });

  it('not queued on the masters (standing by for a holder of ours), goes to ask at once', async () => {
    const local = handOver();
    const head = sleepingHead(local, 'k', false);
    local.wakeNext('k', true);
    expect(head.wakeNow).toHaveBeenCalled();
    await head.end();
  });
});
