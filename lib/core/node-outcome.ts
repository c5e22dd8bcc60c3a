/**
 * What one master did with one request. `granted` means it did what was asked (set, extended
 * or deleted our key); `refused` means it answered but the key is not ours; `quarantined` means
 * it restarted too recently for its vote to count, so it was not asked.
 */
export type NodeStatus = 'granted' | 'refused' | 'error' | 'timeout' | 'quarantined' | 'pending';

export interface NodeOutcome {
  readonly node: string;
  status: NodeStatus;
  /** Error text, free of credentials, when status is error, timeout or quarantined. */
  error?: string;
  /** Script-specific number: the blocking key's pttl on refusal, or a fence value on grant. */
  value?: number;
}
