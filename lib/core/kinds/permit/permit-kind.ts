import type { LockKind } from '../../lock/lock-kind.js';
import type { Lock, ReleaseResult } from '../../lock/lock.js';
import { lineOf } from '../../waiting/local-hand-over.js';
import type { Waiter } from '../../waiting/waiter.js';
import { handAwayFrom, handOverOrFree } from '../hand-over-release.js';
import type { AttemptCall, Attempted, HeldBy, KindParts } from '../hold-kind.js';
import { SHARED_CONTENDERS, SharedKind } from '../shared/shared-holds.js';

/**
 * Permits of a semaphore (`limit` > 1): at most `limit` holders of a resource at once, each in a
 * numbered slot that a majority of masters agreed on. A permit released while a caller of this
 * process sleeps between its rounds for the same semaphore passes to it (LocalHandOver): the slot
 * stays held on the masters under the same token, so the number of holders never grows, and the
 * caller skips a release, a wake-up and a round that could split over slots.
 */
export class PermitKind extends SharedKind {
  /** More callers of ours after a permit than there are permits could only be refused. */
  readonly width: number;

  constructor(parts: KindParts, kind: LockKind) {
    super(parts, kind);
    this.width = Math.min(kind.limit, SHARED_CONTENDERS);
  }

  /**
   * A new caller behind one of ours that the masters refused, while another of ours holds a
   * permit: the permits are all taken, so its round would only be refused too. It waits for that
   * holder's hand-over or release instead (as a lock's caller does), and costs the masters nothing.
   */
  override holderHere(line: string): Lock | undefined {
    const local = this.localLine(line);
    return this.rounds.handOver.sleeping(local) ? this.rounds.handOver.holderOf(local) : undefined;
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
  override handAway(lock: Lock, held: HeldBy | undefined): void {
    handAwayFrom(this.rounds, lock, held, this.localLine(lineOf(lock.keys)), '');
  }

  protected get scriptLimit(): number {
    return this.kind.limit;
  }

  protected slotsOf(agreed: string): number[] {
    return agreed.split(' ').map(Number);
  }

  /** '' where no slot was agreed on: the release then drops our entry whatever its slot. */
  protected slotArgs(slots: readonly number[] | undefined, count: number): string[] {
    return Array.from({ length: count }, (_, i) => (slots?.[i] === undefined ? '' : String(slots[i])));
  }
}
