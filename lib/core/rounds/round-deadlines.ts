import { monotonicNow } from '../base/clock.js';

/** A round's deadline: `cancelDeadline` it once the round no longer needs it. */
export interface Deadline {
  /** @internal When it falls due (monotonic ms). */
  readonly at: number;
  /** @internal Undefined once cancelled or fired. */
  fire: (() => void) | undefined;
  /** @internal */
  readonly list: DeadlineList;
}

/**
 * The deadlines of one timeout length, in the order they fall due: a deadline set later falls
 * due later, so a list stays sorted by only ever appending.
 */
class DeadlineList {
  items: Deadline[] = [];
  head = 0;
  timer: ReturnType<typeof setTimeout> | undefined;

  constructor(readonly timeoutMs: number) {}

  /** Fires what is due, forgets what was cancelled, and waits for the next one still standing. */
  readonly due = (): void => {
    // `timer` still names the timer that fired until the end: a deadline set by a `fire` below
    // waits for the timer armed there, not one of its own.
    const now = monotonicNow();
    try {
      // `items` and `head` read afresh each time: a `fire` that cancels a deadline may trim them.
      while (this.head < this.items.length) {
        const deadline = this.items[this.head]!;
        if (deadline.fire && deadline.at > now) break;
        this.head++;
        const fire = deadline.fire;
        deadline.fire = undefined;
        fire?.();
      }
    } finally {
      // Even past a throwing `fire`: the deadlines after it must still fall due.
      this.#next(now);
    }
  };

  #next(now: number): void {
    if (this.head === this.items.length) {
      // Nothing left: the next round of this length starts a list of its own.
      this.timer = undefined;
      if (lists.get(this.timeoutMs) === this) lists.delete(this.timeoutMs);
      return;
    }
    this.#compact();
    this.#arm(this.items[this.head]!.at - now);
  }

  add(deadline: Deadline): void {
    this.items.push(deadline);
    if (!this.timer) this.#arm(this.timeoutMs);
  }

  /**
   * Drops cancelled deadlines from both ends. A deadline kept until the timer passes it would
   * outlive a young-generation collection or two and be copied into the old generation, a
   * round at a time; the rounds of one caller, or of callers answered in the order they asked,
   * are cancelled at an end.
   */
  trim(): void {
    const items = this.items;
    while (items.length > this.head && items[items.length - 1]!.fire === undefined) items.pop();
    while (this.head < items.length && items[this.head]!.fire === undefined) this.head++;
    this.#compact();
  }

  /** Lets go of the deadlines before `head`: all of them at once, or in a copy once they are most of the list. */
  #compact(): void {
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    } else if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  #arm(delayMs: number): void {
    // Unref'd: a round out keeps its connections, and they the process, alive; a timer left
    // waiting for rounds that ended long ago must not.
    this.timer = setTimeout(this.due, Math.max(1, Math.ceil(delayMs)));
    this.timer.unref();
  }
}

const lists = new Map<number, DeadlineList>();

/**
 * Calls `fire` once `timeoutMs` has passed, unless cancelled first. One Node timer per timeout
 * length serves every round's deadline and stays armed while any is set: a round, answered in
 * a fraction of a millisecond, costs an array entry instead of a timer set and cleared (for a
 * caller alone, Node then also drops and re-creates its timer list and reschedules its libuv
 * timer, every round).
 */
export function setDeadline(timeoutMs: number, fire: () => void): Deadline {
  let list = lists.get(timeoutMs);
  if (!list) {
    list = new DeadlineList(timeoutMs);
    lists.set(timeoutMs, list);
  }
  const deadline: Deadline = { at: monotonicNow() + timeoutMs, fire, list };
  list.add(deadline);
  return deadline;
}

export function cancelDeadline(deadline: Deadline): void {
  if (deadline.fire === undefined) return;
  deadline.fire = undefined;
  deadline.list.trim();
}
