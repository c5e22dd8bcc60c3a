/**
 * What one master did with one request. `granted` means it did what was asked (set, extended
 * or deleted our key); `refused` means it answered but the key is not ours; `quarantined` means
 * it restarted too recently for its vote to count, so it was not asked.
 */
export type NodeStatus = 'granted' | 'refused' | 'error' | 'timeout' | 'quarantined' | 'pending';

/** What one master answered in one round, as errors and release results report it. */
export interface NodeOutcome {
  /** The master, by host and port only (or `sentinel:<name>@…`, `cluster:<first node>`). */
  readonly node: string;
  /** What it did in the round. */
  status: NodeStatus;
  /** Error text, free of credentials, when status is error, timeout or quarantined. */
  error?: string;
  /** Script-specific number: the blocking key's pttl on refusal, or a fence value on grant. */
  value?: number;
  /** When quarantined: how long until its votes count again, in ms. */
  quarantinedForMs?: number;
}

/**
 * How long until enough masters in restart quarantine come out of it for a quorum, with the
 * `voting` masters whose votes count now: 0 when those are a quorum already, undefined when
 * every quarantine ending would still not be enough (too many masters down).
 */
export function quorumResumesInMs(voting: number, quarantinedForMs: readonly number[], quorum: number): number | undefined {
  const needed = quorum - voting;
  if (needed <= 0) return 0;
  if (needed > quarantinedForMs.length) return undefined;
  return [...quarantinedForMs].sort((a, b) => a - b)[needed - 1];
}

/** The same for one round's outcomes; undefined also when no master was quarantined. */
export function roundResumesInMs(outcomes: readonly NodeOutcome[], quorum: number): number | undefined {
  const quarantined = outcomes.filter((o) => o.status === 'quarantined' && o.quarantinedForMs !== undefined);
  if (quarantined.length === 0) return undefined;
  // A straggler still in flight has not failed: count it, as the next round will find out.
  const voting = outcomes.filter((o) => o.status === 'granted' || o.status === 'refused' || o.status === 'pending').length;
  return quorumResumesInMs(voting, quarantined.map((o) => o.quarantinedForMs!), quorum);
}
