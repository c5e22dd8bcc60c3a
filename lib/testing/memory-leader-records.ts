import type { LeaderInfo, LeaderRecords } from '../core/election/leader-records.js';
import type { Lock } from '../core/lock/lock.js';

/** Who leads each election of an in-memory engine: its leader's lock, while that lock lives. */
export class MemoryLeaderRecords implements LeaderRecords {
  readonly #leaders = new Map<string, { readonly lock: Lock; readonly identity: string }>();

  async write(lock: Lock, identity: string): Promise<void> {
    if (lock.remainingMs() > 0) this.#leaders.set(lock.resources[0]!, { lock, identity });
  }

  async read(election: string, resource: string): Promise<LeaderInfo | null> {
    const leader = this.#leaders.get(resource);
    const leaseRemainingMs = leader ? Math.round(leader.lock.remainingMs()) : 0;
    if (!leader || leaseRemainingMs <= 0) return null;
    return { election, identity: leader.identity, term: leader.lock.fence ?? 0, leaseRemainingMs };
  }
}
