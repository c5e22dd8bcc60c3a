import { LEAVE_SCRIPT, QUEUE_ENTRY_STAY_MS } from './queue-scripts.js';
import type { NodeStatus } from '../base/node-outcome.js';
import { inFlight, type RoundResult } from '../rounds/quorum-round.js';
import type { RedisNode } from '../voters/redis-node.js';
import type { Waiter } from './waiter.js';
import type { KeyNames } from '../rounds/key-names.js';

/** How a waiter that gives up (or is handed a lock) leaves the masters' queues: see QueueEntries. */
export interface QueueLeaving {
  leave(resources: readonly string[], waiter: Waiter, keep: string): void;
  leaveNow(resources: readonly string[], waiter: Waiter, keep: string): Promise<void>;
}

/**
 * A waiter's entries in the masters' fair queues (one hash per resource): an entry that
 * outlives its reason stands ahead of every other waiter until it dies, up to a ttl and a
 * second, so the engine withdraws entries as soon as they are no longer needed.
 */
export class QueueEntries implements QueueLeaving {
  constructor(
    private readonly nodes: readonly RedisNode[],
    private readonly names: KeyNames,
  ) {}

  keys(resources: readonly string[]): string[] {
    const keys: string[] = []; // packed, see runRound
    for (const resource of resources) keys.push(this.names.queue(resource));
    return keys;
  }

  /**
   * A waiter that gives up leaves the masters' queues, and hands on keys reserved for it,
   * instead of blocking the others until its entry dies. A hand-off waiter also hands on any key
   * a release granted it, but for `keep`: the token of the lock it holds ('' when it holds none;
   * a lock handed over in this process keeps its first holder's token, so that holder's leave
   * must name it). Sent after the current I/O turn: it only spares others a wait, and a holder's
   * first writes should not queue behind it.
   */
  leave(resources: readonly string[], waiter: Waiter, keep: string, nodes: readonly RedisNode[] = this.nodes): void {
    if (!waiter.id || nodes.length === 0) return;
    setImmediate(() => void this.leaveNow(resources, waiter, keep, nodes));
  }

  /** `leave` at once, settling when every master has answered or failed (for shutdown, before the connections close). */
  async leaveNow(resources: readonly string[], waiter: Waiter, keep: string, nodes: readonly RedisNode[] = this.nodes): Promise<void> {
    if (!waiter.id) return;
    const keys = [...resources.map((resource) => this.names.lock(resource)), ...this.keys(resources), ...resources.map((resource) => this.names.holders(resource))];
    const args = [QUEUE_ENTRY_STAY_MS, waiter.id, waiter.existingGrants?.prefix ?? '', keep];
    await Promise.all(nodes.map((node) => node.run(LEAVE_SCRIPT, keys, args).catch(() => {})));
  }

  /**
   * After a win: entries on masters that did not grant would head their queues until they died,
   * so were this holder to crash its successor would wait that long. A grant dropped our entry
   * on its master; elsewhere it is withdrawn, on a straggler once its answer has landed (a leave
   * overtaking the acquire would be undone by it).
   */
  withdrawWhereRefused(
    resources: readonly string[],
    waiter: Waiter,
    round: RoundResult,
    keep: string,
    /** Masters that granted the lock by hand-off since: that dropped the entry too. */
    handedOffBy?: ReadonlySet<number>,
  ): void {
    if (!waiter.id) return;
    // An entry may be left where the master refused us, in this round or (enlisted) an earlier
    // one, and where the request may have run unseen (no answer in time, or an error after it
    // went out): this is the holder's only withdrawal: its release or hand-over sends none.
    const holdsEntry = (status: NodeStatus) => status !== 'granted' && (waiter.enlisted || status !== 'quarantined');
    const landed: RedisNode[] = [];
    round.outcomes.forEach((outcome, index) => {
      if (handedOffBy?.has(index)) return;
      const node = this.nodes[index]!;
      const pending = inFlight(round, index);
      if (pending) {
        pending.then(() => {
          if (holdsEntry(outcome.status)) this.leave(resources, waiter, keep, [node]);
        });
      } else if (holdsEntry(outcome.status)) {
        landed.push(node);
      }
    });
    this.leave(resources, waiter, keep, landed);
  }
}
