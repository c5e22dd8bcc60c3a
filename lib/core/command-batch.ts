/** More than this many requests in one tick go out as several calls, so no script runs long. */
const MAX_BATCH = 256;

/** Batches with requests waiting, across masters and engines: one nextTick flushes them all. */
const due: { flush(): void }[] = [];

function flushDue(): void {
  for (const batch of due.splice(0)) batch.flush();
}

interface Pending<Item, Result> {
  readonly item: Item;
  readonly resolve: (result: Result) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Requests to one master made in the same tick, sent as one call at the end of the tick: many
 * concurrent callers then cost the client and the server one command, one reply and one script
 * run per master instead of one each. The flush runs on `process.nextTick` from the first
 * request, which is after every promise continuation of the current tick, so callers woken by
 * one socket read land in one batch; one nextTick serves every batch that is due, so a round to
 * five masters schedules one, not five. A request's round starts its clock before it is queued,
 * so the wait for the flush is counted against the lock's validity, never in its favour.
 */
export class CommandBatch<Item, Result> {
  #pending: Pending<Item, Result>[] = [];

  constructor(private readonly send: (items: readonly Item[]) => Promise<readonly Result[]>) {}

  add(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      if (this.#pending.length === 0) {
        if (due.length === 0) process.nextTick(flushDue);
        due.push(this);
      }
      this.#pending.push({ item, resolve, reject });
    });
  }

  /** @internal Sends what is pending; called by the shared flush. */
  flush(): void {
    const all = this.#pending;
    this.#pending = [];
    for (let from = 0; from < all.length; from += MAX_BATCH) {
      const batch = all.slice(from, from + MAX_BATCH);
      let sent: Promise<readonly Result[]>;
      try {
        sent = this.send(batch.map((pending) => pending.item));
      } catch (error) {
        sent = Promise.reject(error);
      }
      sent.then(
        (results) => batch.forEach((pending, index) => pending.resolve(results[index]!)),
        (error: unknown) => batch.forEach((pending) => pending.reject(error)),
      );
    }
  }
}
