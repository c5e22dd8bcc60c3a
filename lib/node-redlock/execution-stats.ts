import type { RoundOutcomes } from '../core/index.js';
import { ResourceLockedError } from './errors.js';
import type { Client, ExecutionStats } from './types.js';

/**
 * One round's outcomes as node-redlock's votes: `clients` in the order the engine was given
 * them, which is the order of every round's outcomes. A master still answering when the round
 * was decided has no vote yet (node-redlock would wait for it; its answer changes nothing).
 */
export function statsOf(outcomes: RoundOutcomes, clients: readonly Client[], resources: number): ExecutionStats {
  const stats: ExecutionStats = {
    membershipSize: clients.length,
    quorumSize: Math.floor(clients.length / 2) + 1,
    votesFor: new Set(),
    votesAgainst: new Map(),
  };
  outcomes.forEach((outcome, index) => {
    const client = clients[index];
    if (!client || outcome.status === 'pending') return;
    if (outcome.status === 'granted') stats.votesFor.add(client);
    else if (outcome.status === 'refused') {
      // The engine's scripts are all or nothing: a refusing master applied the operation to none.
      stats.votesAgainst.set(client, new ResourceLockedError(`The operation was applied to: 0 of the ${resources} requested resources.`));
    } else stats.votesAgainst.set(client, new Error(outcome.error ?? outcome.status));
  });
  return stats;
}
