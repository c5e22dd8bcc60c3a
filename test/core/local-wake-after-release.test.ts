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
  return { waiter, wakeNow, end: () => (wake(), asleep) };
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

describe('callers standing by, with none of their process holding or queued on the masters', () => {
  it('go to ask one at a time: the next once the one asking is done', async () => {
    const local = new LocalHandOver({} as LockEngine, new LocalQueue());
    const heads = [0, 1, 2].map(() => sleepingHead(local, 'k', false));
    local.wakeNext('k', true);
    expect(heads.map((head) => head.wakeNow.mock.calls.length)).toEqual([1, 0, 0]);
    // Its sleep ends and it asks; another release meanwhile sends nobody else.
    await heads[0]!.end();
    local.wakeNext('k', true);
    expect(heads.map((head) => head.wakeNow.mock.calls.length)).toEqual([1, 0, 0]);
    // Its wait is over (a hold, or given up): the longest standing by after it goes.
    heads[0]!.waiter.close();
    expect(heads.map((head) => head.wakeNow.mock.calls.length)).toEqual([1, 1, 0]);
    await Promise.all(heads.slice(1).map((head) => head.end()));
  });
});

describe("a grant that left room wakes the process's heads asleep", () => {
  it('as many as it left room for, the longest asleep first', async () => {
    const queue = new LocalQueue();
    expect(queue.enter('k', 4)).toBe(true);
    const woken: number[] = [];
    const wake: (() => void)[] = [];
    const asleep = [0, 1, 2].map((index) =>
      queue.asleep('k', { wakeNow: () => woken.push(index) }, () => new Promise<void>((resolve) => wake.push(resolve))),
    );
    queue.wakeHeads('k', 2);
    expect(woken).toEqual([0, 1]);
    queue.wakeHeads('k');
    expect(woken).toEqual([0, 1, 0, 1, 2]);
    for (const end of wake) end();
    await Promise.all(asleep);
    queue.leave('k');
  });
});
