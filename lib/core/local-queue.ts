/**
 * Waiters for the same resources in one process line up here, first come first served, and
 * only the head talks to Redis: N local waiters cost the masters what one contender costs.
 * The head gives way as soon as it holds the lock or gives up, so a lock that is never
 * released cannot block the queue.
 */
export class LocalQueue {
  readonly #lines = new Map<string, Array<(predecessorFoundNoQuorum: boolean) => void>>();

  /** How many callers wait behind the head of `key`'s line. */
  waiting(key: string): number {
    return this.#lines.get(key)?.length ?? 0;
  }

  /**
   * Takes the head of `key`'s line if nobody holds it (true), else false and `join` must wait.
   * After true, as after `join`, `leave` must follow, always.
   */
  enter(key: string): boolean {
    if (this.#lines.has(key)) return false;
    this.#lines.set(key, []);
    return true;
  }

  /**
   * Resolves when the caller is at the head of `key`'s line, with whether the caller before it
   * gave up because too few masters answered; `leave` must follow, always. Rejects with
   * `signal`'s reason when it aborts first, or with an Error after `timeoutMs`.
   */
  async join(key: string, signal?: AbortSignal, timeoutMs?: number): Promise<boolean> {
    if (this.enter(key)) return false;
    const line = this.#lines.get(key)!;
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
   * The head is done (holds the lock or gave up): the next waiter's turn. It is told when the
   * head gave up for want of a quorum, so a line of callers learns of an outage in one round each.
   */
  leave(key: string, foundNoQuorum = false): void {
    const line = this.#lines.get(key);
    if (!line) return;
    const next = line.shift();
    if (next) next(foundNoQuorum);
    else this.#lines.delete(key);
  }
}

