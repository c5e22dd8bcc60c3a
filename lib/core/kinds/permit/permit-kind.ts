import type { Lock, ReleaseResult } from '../../lock/lock.js';
import { lineOf } from '../../waiting/local-hand-over.js';
import type { Waiter } from '../../waiting/waiter.js';
import { handAwayFrom, handOverOrFree } from '../hand-over-release.js';
import type { AttemptCall, Attempted, HeldBy } from '../hold-kind.js';
import { SharedKind } from '../shared/shared-holds.js';

/**
 * Permits of a semaphore (`limit` > 1): at most `limit` permits of a resource held at once, each
 * a numbered slot that a majority of masters agreed on; a weighted hold (`permits` > 1) takes
 * that many slots, all or none, as one entry on each master. A hold released while a caller of
 * this process sleeps between its rounds for the same semaphore and weight passes to it
 * (LocalHandOver): the slots stay held on the masters under the same token, so the permits in use
 * never grow, and the caller skips a release, a wake-up and a round that could split over slots.
 */
export class PermitKind extends SharedKind {
  /**
   * A new caller behind one of ours that the masters refused, while another of ours holds a
   * permit: the permits are all taken, so its round would only be refused too. It waits for that
   * holder's hand-over or release instead (as a lock's caller does), and costs the masters nothing.
   */
  override holderHere(line: string): Lock | undefined {
    const local = this.localLine(line);
    return this.rounds.handOver.sleeping(local) ? this.rounds.handOver.holderOf(local) : undefined;
  }

  override standByMs(line: string): number | undefined {
    return this.holderHere(line)?.remainingMs();
  }

  override async attempt(call: AttemptCall): Promise<Attempted> {
    const attempted = await super.attempt(call);
    if ('lock' in attempted) this.rounds.handOver.held(this.localLine(lineOf(call.keys)), attempted.lock);
    return attempted;
  }

  /** Between rounds: where a permit released in this process can be handed to this waiter. */
  override sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>, handOver = false): Promise<void> {
    const sleep = () => super.sleep(localLine, waiter, pause);
    return handOver ? this.rounds.handOver.asleep(localLine, waiter, sleep) : sleep();
  }

  /** To a caller of this process sleeping for the same semaphore, if one is; else freed on every master. */
  override release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult> {
    return handOverOrFree(this.rounds, lock, held, this.localLine(lineOf(lock.keys)), '', () => super.release(lock, held));
  }

  /** Handed to another process: the next caller of this process standing by for the semaphore asks the masters. */
  override handAway(lock: Lock): void {
    handAwayFrom(this.rounds, lock, this.localLine(lineOf(lock.keys)));
  }

  protected get scriptLimit(): number {
    return this.kind.limit;
  }

  /** Resource by resource, `permits` slots each ("0,2 1,3" → [0, 2, 1, 3]). */
  protected slotsOf(agreed: string): number[] {
    return agreed.split(/[ ,]/).map(Number);
  }

  /** '' where no slots were agreed on: the release then drops our entry whatever its slots. */
  protected slotArgs(slots: readonly number[] | undefined, count: number): string[] {
    const { permits } = this.kind;
    return Array.from({ length: count }, (_, i) => (slots === undefined ? '' : slots.slice(i * permits, (i + 1) * permits).join(',')));
  }
}
