import type { Lock, ReleaseResult } from '../../lock/lock.js';
import type { RoundResult } from '../../rounds/quorum-round.js';
import { lineOf } from '../../waiting/local-hand-over.js';
import { QUEUE_ENTRY_STAY_MS } from '../../waiting/queue-scripts.js';
import type { Waiter } from '../../waiting/waiter.js';
import type { AttemptCall, Attempted, HeldBy } from '../hold-kind.js';
import { SharedKind } from '../shared/shared-holds.js';
import { ReadersHere } from './readers-here.js';

/**
 * Readers (`mode: 'read'`): any number hold a resource together, and none while a writer does.
 * They share the holders' protocol with permits; a reader's slot is `r`, never counted.
 *
 * A reader of this process that the masters refused (a writer holds or is queued ahead) sleeps
 * queued on them until a writer's release wakes every reader ahead of the next writer. A new
 * reader of this process meanwhile would only be refused too: it stands by until the queued one,
 * woken, has had its round, then joins the hold that round won (below) or asks itself. Its place
 * is its ticket, taken when it began, which the masters' queue compares with the writers' whether
 * or not it is queued there, so standing by costs it no turn.
 *
 * A new reader of this process joins a read hold another reader of it holds (ReadersHere): no
 * round at all; one that would send a round while another has one out for the same keys waits
 * for that round (stands by, if it is new and waits) and joins what it won.
 */
export class ReadKind extends SharedKind {
  /** Per line, the readers of this process asleep queued on the masters after a refusal. */
  readonly #refused = new Map<string, Set<Waiter>>();
  /** Per line, the readers of this process standing by for those. */
  readonly #standingBy = new Map<string, Set<Waiter>>();
  readonly #readers = new ReadersHere();
  /** Per line, the readers of this process woken from the masters' queue whose round is out. */
  readonly #asking = new Map<string, Set<Waiter>>();
  /** Per line, the round an unfenced reader of this process has out, settled once it has answered and its hold, if any, takes joiners. */
  readonly #roundsOut = new Map<string, Promise<undefined>>();

  protected get scriptLimit(): number {
    return 0;
  }

  protected slotsOf(): undefined {
    return undefined;
  }

  protected slotArgs(_slots: readonly number[] | undefined, count: number): string[] {
    return Array.from({ length: count }, () => 'r');
  }

  override async attempt(call: AttemptCall): Promise<Attempted> {
    const keysLine = lineOf(call.keys);
    const line = this.localLine(keysLine);
    // A fenced reader needs a fence of its own, from a round of its own.
    let joined = call.fencing ? undefined : this.#readers.join(line, call.ttlMs, this.rounds.engine);
    try {
      const out = call.fencing || joined ? undefined : this.#roundsOut.get(line);
      if (out) {
        // Another reader of this process has a round out for these keys (readers woken together
        // from the masters' queue, or callers that do not wait; a new caller that waits stood by
        // for it instead, see standByMs): the hold it wins takes this one in, for no round.
        // Refused, each asks itself, once: waiting again would queue them one round apart.
        await out;
        joined = this.#readers.join(line, call.ttlMs, this.rounds.engine);
      }
      if (joined) {
        this.rounds.held(joined, undefined, call.waiter, false);
        this.rounds.sharedHere.add(keysLine, joined);
        // Refused earlier and queued on the masters: its entries would head their queues all through its hold.
        if (call.waiter.enlisted) this.rounds.entries.leave(call.resources, call.waiter, '');
        return { lock: joined, room: Infinity, outcomes: undefined };
      }
      const round = super.attempt(call).then((attempted) => {
        if ('lock' in attempted) this.#readers.won(line, attempted.lock);
        return attempted;
      });
      if (call.fencing || this.#roundsOut.has(line)) return await round;
      const settled = round.then(
        () => undefined,
        () => undefined,
      );
      this.#roundsOut.set(line, settled);
      try {
        return await round;
      } finally {
        if (this.#roundsOut.get(line) === settled) this.#roundsOut.delete(line);
        this.#roundEnded(line);
      }
    } finally {
      // Woken from the masters' queue, it has its answer (a round, or a hold to join): those standing by go.
      this.#asked(line, call.waiter);
    }
  }

  override extend(lock: Lock, ttlMs: number): Promise<RoundResult> {
    return this.#readers.extend(lock, ttlMs, this.rounds.options.driftFactor, (ttl) => super.extend(lock, ttl));
  }

  override release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult> {
    const line = lineOf(lock.keys);
    this.rounds.sharedHere.remove(line, lock);
    return this.#readers.release(lock, this.localLine(line), held, (founderHeld) => super.release(lock, founderHeld));
  }

  handOverRefusal(lock: Lock): string | undefined {
    return this.#readers.handOverRefusal(lock);
  }

  override handAway(lock: Lock): void {
    super.handAway(lock);
    this.#readers.handedAway(lock, this.localLine(lineOf(lock.keys)));
  }

  /**
   * None while a hold of this process takes joiners; else, while a reader of this process has a
   * round out, is queued on the masters or is woken from there and asking, at most a queue
   * entry's stay: it wakes by then (or its entry lapses), and its round ends in a hold to join or
   * a place in the queue.
   */
  override standByMs(line: string): number | undefined {
    const localLine = this.localLine(line);
    if (this.#readers.open(localLine)) return undefined;
    return this.#refused.has(localLine) || this.#asking.has(localLine) || this.#roundsOut.has(localLine) ? QUEUE_ENTRY_STAY_MS : undefined;
  }

  /**
   * A round out for `localLine` ended: those standing by for it join the hold it won. Refused, it
   * sleeps queued (its caller goes there before the next turn of the event loop), and they stand
   * by for it as for any reader of this process queued on the masters; if it does not (it gave up,
   * or backs off after an error), they go.
   */
  #roundEnded(localLine: string): void {
    if (this.#readers.open(localLine)) {
      this.#wakeStandingBy(localLine);
      return;
    }
    setImmediate(() => {
      if (!this.#refused.has(localLine) && !this.#asking.has(localLine) && !this.#roundsOut.has(localLine)) this.#wakeStandingBy(localLine);
    });
  }

  override async sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>): Promise<void> {
    // Queued: refused by the masters. Else standing by (or backing off, which a wake-up only shortens).
    const queued = waiter.enlisted;
    const sleepers = queued ? this.#refused : this.#standingBy;
    let set = sleepers.get(localLine);
    if (!set) sleepers.set(localLine, (set = new Set()));
    set.add(waiter);
    let asks = false;
    try {
      await super.sleep(localLine, waiter, pause);
      asks = queued;
    } finally {
      set.delete(waiter);
      if (set.size === 0) sleepers.delete(localLine);
      // Woken (a writer's release woke the readers) or timed out, it asks the masters: those standing
      // by go once it has its answer (a hold they join, or a refusal that queues it again). Given
      // up: they go now.
      if (asks) this.#startAsking(localLine, waiter);
      else if (queued) this.#wakeStandingBy(localLine);
    }
  }

  /** `waiter`, woken from the masters' queue, asks them for `localLine`: the callers standing by there wait for its round. */
  #startAsking(localLine: string, waiter: Waiter): void {
    let asking = this.#asking.get(localLine);
    if (!asking) this.#asking.set(localLine, (asking = new Set()));
    asking.add(waiter);
    // Given up before its round (aborted, releaseAll): they go then.
    waiter.whenClosed(() => this.#asked(localLine, waiter));
  }

  /** The round of a reader woken from the masters' queue is over (or it gave up): those standing by go. */
  #asked(localLine: string, waiter: Waiter): void {
    const asking = this.#asking.get(localLine);
    if (!asking?.delete(waiter)) return;
    if (asking.size === 0) this.#asking.delete(localLine);
    this.#wakeStandingBy(localLine);
  }

  #wakeStandingBy(localLine: string): void {
    for (const standingBy of this.#standingBy.get(localLine) ?? []) standingBy.wakeNow();
  }
}
