/** More than this many requests in one tick go out as several calls, so no script runs long. */
const MAX_BATCH = 256;
/**
 * Nor more keys than this in one call (a request with more goes alone): a call's size, on the
 * stack and on the server, stays what one lock of the largest allowed size costs.
 */
const MAX_BATCH_KEYS = 1_024;

/** Batches with requests waiting, across masters and engines. */
const due: { flush(): void }[] = [];
/** Connections that sent a request at once in the current tick. */
const claimed: TickLane[] = [];

/**
 * The end of a tick in which a request was sent: what was batched behind it goes out, and the
 * connections are free again for a request at once. Both in one callback, so that no request
 * can be sent at once while a batch ahead of it still waits.
 */
function endOfTick(): void {
  for (const batch of due.splice(0)) batch.flush();
  for (const lane of claimed.splice(0)) lane.used = false;
}

/**
 * One master connection's requests in the current tick, shared by its batches (takes and
 * frees), so that its requests leave in the order they were made whatever their kind.
 */
export class TickLane {
  /** @internal */
  used = false;

  /** True for the first request of the tick on this connection: it may go out at once. */
  claim(): boolean {
    if (this.used) return false;
    this.used = true;
    if (claimed.length === 0) process.nextTick(endOfTick);
    claimed.push(this);
    return true;
  }
}

interface Pending<Item, Result> {
  readonly item: Item;
  readonly resolve: (result: Result) => void;
  readonly reject: (error: unknown) => void;
}

/** How a batch sends: one request alone, or two or more of a tick in one call. */
export interface BatchSender<Item, Result> {
  one(item: Item): Promise<Result>;
  many(items: readonly Item[]): Promise<readonly Result[]>;
  /** How many keys a request carries. Default 1. */
  keys?(item: Item): number;
}

/**
 * Requests to one master made in the same tick. The first goes out at once: a caller alone
 * pays no wait and no batching. Those that follow it in the same tick are sent as one call at
 * the end of the tick, so many concurrent callers cost the client and the server two commands,
 * two replies and two script runs per master instead of one each. The end of the tick is a
 * `process.nextTick` from the first request, after every promise continuation of the current
 * tick, so callers woken by one socket read land in one batch; one nextTick serves every
 * batch, across masters and engines. A request's round starts its clock before it is queued,
 * so the wait for the flush is counted against the lock's validity, never in its favour.
 */
export class CommandBatch<Item, Result> {
  #pending: Pending<Item, Result>[] = [];

  constructor(
    private readonly lane: TickLane,
    private readonly sender: BatchSender<Item, Result>,
  ) {}

  add(item: Item): Promise<Result> {
    if (this.lane.claim()) return this.sender.one(item);
    return new Promise<Result>((resolve, reject) => {
      if (this.#pending.length === 0) due.push(this);
      this.#pending.push({ item, resolve, reject });
    });
  }

  /** @internal Sends what is pending; called at the end of the tick. */
  flush(): void {
    const all = this.#pending;
    this.#pending = [];
    const keysOf = this.sender.keys;
    let from = 0;
    while (from < all.length) {
      let to = from + 1;
      let keys = keysOf ? keysOf(all[from]!.item) : 1;
      while (to < all.length && to - from < MAX_BATCH) {
        const more = keysOf ? keysOf(all[to]!.item) : 1;
        if (keys + more > MAX_BATCH_KEYS) break;
        keys += more;
        to++;
      }
      this.#send(all.slice(from, to));
      from = to;
    }
  }

  #send(batch: Pending<Item, Result>[]): void {
    let sent: Promise<readonly Result[]>;
    try {
      // A batch of one is sent like a request alone, so a sender's `many` always has company.
      sent =
        batch.length === 1
          ? this.sender.one(batch[0]!.item).then((result) => [result])
          : this.sender.many(batch.map((pending) => pending.item));
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent.then(
      (results) => batch.forEach((pending, index) => pending.resolve(results[index]!)),
      (error: unknown) => batch.forEach((pending) => pending.reject(error)),
    );
  }
}
