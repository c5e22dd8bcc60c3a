/**
 * What one master did with one request. `granted` means it did what was asked (set, extended
 * or deleted our key); `refused` means it answered but the key is not ours.
 */
export type NodeStatus = 'granted' | 'refused' | 'error' | 'timeout' | 'pending';

export interface NodeOutcome {
  readonly node: string;
  status: NodeStatus;
  /** Error text, free of credentials, when status is error or timeout. */
  error?: string;
  /** Script-specific number: the blocking key's pttl on refusal, or a fence value on grant. */
  value?: number;
}
