import { monotonicNow } from '../base/clock.js';
import type { ShardIdentity } from './cluster-scripts.js';
import type { QuarantineNotice } from './restart-quarantine.js';
import { NodeQuarantinedError } from './redis-node.js';

/**
 * Spec section 5 for a Redis Cluster voter. A shard master that restarted empty, or a replica
 * promoted in a failover that had not yet received the newest lock keys, has forgotten locks
 * its slots granted: its votes must not count until every lock it could have forgotten has
 * expired. The cluster client follows a failover by itself, so this is judged on each reply,
 * from the run_id and uptime of the server that ran the script:
 * - a server up for less than the window is too young (a restart): none of its votes count;
 * - a server answering for a slot that another master term answered for before took that slot
 *   over (a failover, a failover and back to the same server, or a slot migration) no later
 *   than that reply: votes for that slot wait the
 *   whole window from then. Per slot, so that every slot first seen later does not push the
 *   other slots' wait back.
 * - a server already promoted from a replica when this engine first sees it (a failover before
 *   this process started, at a moment the server does not say) waits the window from then.
 * A migrated slot (resharding) is quarantined too, needlessly but safely.
 */
/** A range of hash slots and the server that owns it. */
export interface SlotOwner {
  readonly from: number;
  readonly to: number;
  readonly shard: ShardIdentity;
}

const SLOTS = 16_384;

export class ShardQuarantine {
  /**
   * Per hash slot, the master term (server and replication id) that answered for it last, as an
   * index into #terms (-1: none yet). A typed array: learning a cluster's 16384 slots is a fill,
   * not 16384 map entries (an engine made per call, as node-redlock's users do, paid milliseconds).
   */
  readonly #owners = new Int32Array(SLOTS).fill(-1);
  readonly #terms: string[] = [];
  readonly #termIndexes = new Map<string, number>();
  /** Per term index, how many slots it owns now. */
  readonly #slotsOwned: number[] = [];
  /** Per master term, since when its server has been up, on our monotonic clock. */
  readonly #since = new Map<string, number>();
  /** Per hash slot taken over by another server, when that was seen; dropped once its window passed. */
  readonly #takenOver = new Map<number, number>();
  /** Per master term, when its takeover was announced: one notice per failover, not one per slot. */
  readonly #announced = new Map<string, number>();

  constructor(
    private readonly voter: string,
    private readonly windowMs: () => number,
    private readonly notify: (notice: QuarantineNotice) => void,
    /** False: a shard master young at first sight votes; takeovers this engine sees are still waited out. */
    private readonly atFirstSight = true,
  ) {}

  /** What the cluster says now, before any vote: the owner of every slot (a slot already known keeps its owner). */
  learn(owners: readonly SlotOwner[]): void {
    const now = monotonicNow();
    for (const { from, to, shard } of owners) {
      const term = this.#indexOf(shard.term);
      for (let slot = from; slot <= to; slot++) {
        if (this.#owners[slot] === -1) this.#own(slot, term);
      }
      if (!this.#since.has(shard.term)) this.#firstSeen(shard, now);
    }
  }

  #indexOf(term: string): number {
    let index = this.#termIndexes.get(term);
    if (index === undefined) {
      index = this.#terms.push(term) - 1;
      this.#termIndexes.set(term, index);
      this.#slotsOwned.push(0);
    }
    return index;
  }

  #own(slot: number, term: number): void {
    const before = this.#owners[slot]!;
    if (before !== -1) this.#slotsOwned[before]!--;
    this.#owners[slot] = term;
    this.#slotsOwned[term]!++;
  }

  /** Undefined when the vote of `shard`, answering for `slot`, counts; otherwise why not. */
  judge(shard: ShardIdentity, slot: number): NodeQuarantinedError | undefined {
    const now = monotonicNow();
    const window = this.windowMs();
    const ownerIndex = this.#owners[slot]!;
    const owner = ownerIndex === -1 ? undefined : this.#terms[ownerIndex];
    // A server first seen taking a slot over is announced once, as the takeover.
    const since = this.#since.get(shard.term) ?? this.#firstSeen(shard, now, owner === undefined || owner === shard.term);
    if (owner !== shard.term) {
      this.#own(slot, this.#indexOf(shard.term));
      if (owner !== undefined) this.#tookOver(shard, slot, now, window);
    }
    const takenOver = this.#takenOver.get(slot);
    const remaining = window - (now - Math.max(since, takenOver ?? since));
    if (remaining <= 0) {
      if (takenOver !== undefined) this.#takenOver.delete(slot);
      return undefined;
    }
    return new NodeQuarantinedError(this.voter, remaining);
  }

  /** How much longer the longest quarantine of a current slot owner or taken-over slot lasts; undefined when none does. */
  longestMs(): number | undefined {
    const now = monotonicNow();
    const window = this.windowMs();
    let latest = -Infinity;
    this.#terms.forEach((term, index) => {
      if (this.#slotsOwned[index]! > 0) latest = Math.max(latest, this.#since.get(term) ?? -Infinity);
    });
    for (const seen of this.#takenOver.values()) latest = Math.max(latest, seen);
    const remaining = window - (now - latest);
    return remaining > 0 ? Math.ceil(remaining) : undefined;
  }

  /**
   * A server answers for the first time: its votes count once it has been up for the window, or,
   * promoted at some unknown moment, once the window has passed since now.
   */
  #firstSeen(shard: ShardIdentity, now: number, announce = true): number {
    // Trusted at first sight: up for ever, as far as its votes go.
    const since = shard.promoted ? now : this.atFirstSight ? now - shard.uptimeMs : Number.NEGATIVE_INFINITY;
    this.#since.set(shard.term, since);
    const remainingMs = this.windowMs() - (now - since);
    if (announce && remainingMs > 0) this.notify({ node: this.#name(shard), reason: shard.promoted ? 'promoted replica' : 'recent start', remainingMs });
    return since;
  }

  #tookOver(shard: ShardIdentity, slot: number, now: number, window: number): void {
    this.#takenOver.set(slot, now);
    const announced = this.#announced.get(shard.term);
    if (announced !== undefined && now - announced < window) return;
    this.#announced.set(shard.term, now);
    this.notify({ node: this.#name(shard), reason: 'run_id changed', remainingMs: window });
  }

  #name(shard: ShardIdentity): string {
    return `${this.voter} (shard ${shard.runId.slice(0, 12)})`;
  }
}
