/** More than this many requests in one tick go out as several calls, so no script runs long. */
const MAX_BATCH = 256;
/**
 * Nor more keys than this in one call (a request with more goes alone): a call's size, on the
 * stack and on the server, stays what one lock of the largest allowed size costs.
 */
const MAX_BATCH_KEYS = 1_024;

/** Connections with requests waiting for the end of the tick, across masters and engines. */
const due: TickLane[] = [];
/** Connections that sent a request at once in the current tick. */
const claimed: TickLane[] = [];

/**
 * The end of a tick in which a request was sent: what waited behind it goes out, and the
 * connections are free again for a request at once. Both in one callback, so that no request
 * can be sent at once while one made before it still waits.
 */
function endOfTick(): void {
  endOfTickQueued = false;
  for (const lane of due.splice(0)) lane.flush();
  for (const lane of claimed.splice(0)) lane.used = false;
}

let endOfTickQueued = false;

/** One process.nextTick serves every lane of the tick, across masters and engines. */
function onceAtEndOfTick(): void {
  if (endOfTickQueued) return;
  endOfTickQueued = true;
  process.nextTick(endOfTick);
}

/** What waits on a lane for the end of the tick: a run of one batch's requests, or a request sent alone. */
type Waiting = { readonly batch: CommandBatch<unknown, unknown>; readonly pending: Pending<unknown, unknown>[] } | { readonly send: () => void };

/**
 * One master connection's requests in the current tick, shared by its batches (takes and frees)
 * and its requests sent alone, so that its requests leave in the order they were made whatever
 * their kind. A batch takes in a request only while nothing of another kind was made after its
 * last one: a take, a free and a take made in one tick (a catch-up behind a master's
 * identification) go out as three calls in that order, never as the frees before the takes.
 */
export class TickLane {
  /** @internal */
  used = false;
  readonly #waiting: Waiting[] = [];

  /** True for the first request of the tick on this connection: it may go out at once. */
  claim(): boolean {
    if (this.used) return false;
    onceAtEndOfTick();
    this.used = true;
    claimed.push(this);
    return true;
  }

  /** Requests made this tick wait for its end: one sent alone now must go behind them (inOrder). */
  get waiting(): boolean {
    return this.#waiting.length > 0;
  }

  /**
   * Sends a request that is never batched: at once, unless requests made before it wait for the
   * end of the tick; then behind them.
   */
  inOrder<T>(send: () => Promise<T>): Promise<T> {
    if (this.#waiting.length === 0) return send();
    return new Promise<T>((resolve, reject) => {
      this.#wait({
        send: () => {
          try {
            send().then(resolve, reject);
          } catch (error) {
            reject(error);
          }
        },
      });
    });
  }

  /** @internal Queues `pending` behind what waits: in the last run if that is the same batch's. */
  add(batch: CommandBatch<unknown, unknown>, pending: Pending<unknown, unknown>): void {
    const last = this.#waiting[this.#waiting.length - 1];
    if (last && 'batch' in last && last.batch === batch) last.pending.push(pending);
    else this.#wait({ batch, pending: [pending] });
  }

  #wait(waiting: Waiting): void {
    if (this.#waiting.length === 0) {
      onceAtEndOfTick();
      due.push(this);
    }
    this.#waiting.push(waiting);
  }

  /** @internal Sends what waits, in the order it was made; called at the end of the tick. */
  flush(): void {
    for (const waiting of this.#waiting.splice(0)) {
      if ('send' in waiting) waiting.send();
      else waiting.batch.flush(waiting.pending);
    }
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
 * Requests of one kind to one master made in the same tick. The first goes out at once: a caller
 * alone pays no wait and no batching. Those that follow it in the same tick are sent as one call
 * at the end of the tick (one per run of them: see TickLane), so many concurrent callers cost the
 * client and the server two commands, two replies and two script runs per master instead of one
 * each. The end of the tick is a
 * `process.nextTick` from the first request, after every promise continuation of the current
 * tick, so callers woken by one socket read land in one batch; one nextTick serves every
 * batch, across masters and engines. A request's round starts its clock before it is queued,
 * so the wait for the flush is counted against the lock's validity, never in its favour.
 */
export class CommandBatch<Item, Result> {
  constructor(
    private readonly lane: TickLane,
    private readonly sender: BatchSender<Item, Result>,
  ) {}

  add(item: Item): Promise<Result> {
    if (this.lane.claim()) return this.sender.one(item);
    return new Promise<Result>((resolve, reject) => {
      this.lane.add(this as CommandBatch<unknown, unknown>, { item, resolve, reject } as Pending<unknown, unknown>);
    });
  }

  /** @internal Sends a run of this batch's requests, in as few calls as the bounds allow; called at the end of the tick. */
  flush(all: readonly Pending<Item, Result>[]): void {
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
