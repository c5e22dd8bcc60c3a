/** One line: how many of its callers are out talking to Redis, and who waits for a turn. */
interface Line {
  active: number;
  /** Made at the first caller who has to wait: an uncontended line costs one object. */
  waiting: Array<(predecessorFoundNoQuorum: boolean) => void> | undefined;
  /** Heads asleep between their rounds (a wide line's), for `wakeHeads`. */
  asleep: Set<Sleeper> | undefined;
}

/** A head between its rounds: ends its sleep at once. */
export interface Sleeper {
  wakeNow(): void;
}

/**
 * Waiters for the same resources in one process line up here, first come first served, and
 * only the head talks to Redis: N local waiters cost the masters what one contender costs.
 * The head gives way as soon as it holds the lock or gives up, so a lock that is never
 * released cannot block the queue.
 *
 * A line may be wider than one (`width`): readers and permits hold together, so several of
 * them may talk to Redis at once, but never more than `width`. A burst of a thousand shared
 * waiters then costs the masters, and this process's event loop, what `width` contenders cost,
 * instead of a thousand scripts per master and a thousand queue entries that each script scans.
 */
export class LocalQueue {
  readonly #lines = new Map<string, Line>();

  /** How many callers wait behind the heads of `key`'s line. */
  waiting(key: string): number {
    return this.#lines.get(key)?.waiting?.length ?? 0;
  }

  /**
   * Takes a place at the head of `key`'s line if one of its `width` is free and nobody waits
   * for one (true), else false and `join` must wait. After true, as after `join`, `leave` must
   * follow, always.
   */
  enter(key: string, width = 1): boolean {
    const line = this.#lines.get(key);
    if (!line) {
      this.#lines.set(key, { active: 1, waiting: undefined, asleep: undefined });
      return true;
    }
    if (line.active >= width || (line.waiting !== undefined && line.waiting.length > 0)) return false;
    line.active++;
    return true;
  }

  /**
   * Resolves when the caller is at the head of `key`'s line, with whether the caller before it
   * gave up because too few masters answered; `leave` must follow, always. Rejects with
   * `signal`'s reason when it aborts first, or with an Error after `timeoutMs`.
   */
  async join(key: string, signal?: AbortSignal, timeoutMs?: number, width = 1): Promise<boolean> {
    if (this.enter(key, width)) return false;
    const line = (this.#lines.get(key)!.waiting ??= []);
    if (signal?.aborted) throw signal.reason;
    return new Promise<boolean>((resolve, reject) => {
      // A plain timer, not AbortSignal.timeout/any: under contention every caller comes through
      // here, and those cost a signal, a weak timer and a listener set each.
      const giveUp = (error: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = line.indexOf(turn);
        if (index >= 0) line.splice(index, 1);
        reject(error);
      };
      const turn = (predecessorFoundNoQuorum: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(predecessorFoundNoQuorum);
      };
      const onAbort = () => giveUp(signal!.reason);
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => giveUp(new Error(`not at the head of the line after ${timeoutMs} ms`)), timeoutMs);
      line.push(turn);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Runs `sleep` (a head's pause between its rounds) with `sleeper` among the heads of `key`'s
   * line that `wakeHeads` wakes.
   */
  async asleep(key: string, sleeper: Sleeper, sleep: () => Promise<void>): Promise<void> {
    const line = this.#lines.get(key);
    if (!line) return sleep();
    const asleep = (line.asleep ??= new Set());
    asleep.add(sleeper);
    try {
      await sleep();
    } finally {
      asleep.delete(sleeper);
    }
  }

  /**
   * A head of `key`'s line got its hold and left room for `count` more: as many of the other
   * heads (the longest asleep first) try again at once. The masters wake one waiter per grant
   * (the head of their queue), so a line of this process's readers would otherwise go through one
   * wake-up and round at a time, each queued behind the last; woken together, they go in one
   * round trip, in the order they queued.
   */
  wakeHeads(key: string, count = Number.POSITIVE_INFINITY): void {
    const asleep = this.#lines.get(key)?.asleep;
    if (!asleep) return;
    // The longest asleep first, and no more than the grant left room for: the rest would be refused.
    let woken = 0;
    for (const sleeper of asleep) {
      if (woken++ >= count) break;
      sleeper.wakeNow();
    }
  }

  /**
   * A head is done (holds the lock or gave up): its place goes to the next waiter. It is told
   * when the head gave up for want of a quorum, so a line of callers learns of an outage in one
   * round each.
   */
  leave(key: string, foundNoQuorum = false): void {
    const line = this.#lines.get(key);
    if (!line) return;
    const next = line.waiting?.shift();
    if (next) next(foundNoQuorum);
    else if (--line.active === 0) this.#lines.delete(key);
  }
}
