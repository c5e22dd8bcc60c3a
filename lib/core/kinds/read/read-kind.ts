import { QUEUE_ENTRY_STAY_MS } from '../../waiting/queue-scripts.js';
import type { Waiter } from '../../waiting/waiter.js';
import { SharedKind } from '../shared/shared-holds.js';

/**
 * Readers (`mode: 'read'`): any number hold a resource together, and none while a writer does.
 * They share the holders' protocol with permits; a reader's slot is `r`, never counted.
 *
 * A reader of this process that the masters refused (a writer holds or is queued ahead) sleeps
 * queued on them until a writer's release wakes every reader ahead of the next writer. A new
 * reader of this process meanwhile would only be refused too: it stands by, and goes to ask
 * with the queued one when that one wakes. Its place is its ticket, taken when it began, which
 * the masters' queue compares with the writers' whether or not it is queued there, so standing by
 * costs it no turn.
 */
export class ReadKind extends SharedKind {
  /** Per line, the readers of this process asleep queued on the masters after a refusal. */
  readonly #refused = new Map<string, Set<Waiter>>();
  /** Per line, the readers of this process standing by for those. */
  readonly #standingBy = new Map<string, Set<Waiter>>();

  protected get scriptLimit(): number {
    return 0;
  }

  protected slotsOf(): undefined {
    return undefined;
  }

  protected slotArgs(_slots: readonly number[] | undefined, count: number): string[] {
    return Array.from({ length: count }, () => 'r');
  }

  /** At most a queue entry's stay: a reader queued on the masters wakes by then, or its entry lapses. */
  override standByMs(line: string): number | undefined {
    return this.#refused.has(this.localLine(line)) ? QUEUE_ENTRY_STAY_MS : undefined;
  }

  override async sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>): Promise<void> {
    // Queued: refused by the masters. Else standing by (or backing off, which a wake-up only shortens).
    const queued = waiter.enlisted;
    const sleepers = queued ? this.#refused : this.#standingBy;
    let set = sleepers.get(localLine);
    if (!set) sleepers.set(localLine, (set = new Set()));
    set.add(waiter);
    try {
      await super.sleep(localLine, waiter, pause);
    } finally {
      set.delete(waiter);
      if (set.size === 0) sleepers.delete(localLine);
      // Woken (a writer's release woke the readers), timed out or given up: those standing by go too.
      if (queued) for (const standingBy of this.#standingBy.get(localLine) ?? []) standingBy.wakeNow();
    }
  }
}
