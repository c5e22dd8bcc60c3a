import { monotonicNow } from './clock.js';
import type { ShardIdentity } from './cluster-scripts.js';
import type { QuarantineNotice } from './restart-quarantine.js';
import { NodeQuarantinedError } from './redis-node.js';

/**
 * Spec section 5 for a Redis Cluster voter. A shard master that restarted empty, or a replica
 * promoted in a failover that had not yet received the newest lock keys, has forgotten locks
 * its slots granted: its votes must not count until every lock it could have forgotten has
 * expired. The cluster client follows a failover by itself, so this is judged on each reply,
 * from the run_id and uptime of the server that ran the script:
 * - a server up for less than the window is too young (a restart);
 * - a server answering for a slot that another server answered for before took that slot over
 *   (a failover, or a slot migration): it waits the whole window from then.
 * What it cannot see: a failover that happened before this engine first learnt who owned the
 * slot (the baseline is read when the voter is first identified) with the new owner up for
 * longer than the window. A migrated slot (resharding) is quarantined too, needlessly but safely.
 */
export class ShardQuarantine {
  /** Per hash slot, the server that answered for it last. */
  readonly #owners = new Map<number, string>();
  /** Per server (run_id), since when its votes may count, on our monotonic clock. */
  readonly #since = new Map<string, number>();

  constructor(
    private readonly voter: string,
    private readonly windowMs: () => number,
    private readonly notify: (notice: QuarantineNotice) => void,
  ) {}

  /** What the cluster says now, before any vote: the owner of every slot. */
  learn(owners: ReadonlyMap<number, ShardIdentity>): void {
    const now = monotonicNow();
    for (const [slot, shard] of owners) {
      if (!this.#owners.has(slot)) this.#owners.set(slot, shard.runId);
      if (!this.#since.has(shard.runId)) this.#since.set(shard.runId, now - shard.uptimeMs);
    }
  }

  /** Undefined when the vote of `shard`, answering for `slot`, counts; otherwise why not. */
  judge(shard: ShardIdentity, slot: number): NodeQuarantinedError | undefined {
    const now = monotonicNow();
    let since = this.#since.get(shard.runId);
    if (since === undefined) {
      since = now - shard.uptimeMs;
      this.#since.set(shard.runId, since);
    }
    const owner = this.#owners.get(slot);
    if (owner !== shard.runId) {
      this.#owners.set(slot, shard.runId);
      if (owner !== undefined && since < now) {
        since = now;
        this.#since.set(shard.runId, since);
        this.notify({ node: `${this.voter} (shard ${shard.runId.slice(0, 12)})`, reason: 'run_id changed', remainingMs: this.windowMs() });
      }
    }
    const remaining = this.windowMs() - (now - since);
    if (remaining <= 0) return undefined;
    return new NodeQuarantinedError(this.voter, remaining);
  }
}
