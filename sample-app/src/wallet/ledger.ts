/**
 * Every change to an account is also appended to its ledger, in the same MULTI as the balance
 * write. The ledger is the audit trail: the balance must always equal what the ledger adds up
 * to. A lost update (two writers each writing back their own stale read) breaks that, which is
 * how the demo and the reconciliation job spot it.
 */
export interface LedgerEntry {
  kind: 'open' | 'withdraw' | 'transfer-in' | 'transfer-out';
  amount: number;
  /** The replica that wrote it. */
  by: string;
}

export function ledgerBalance(entries: readonly LedgerEntry[]): number {
  let balance = 0;
  for (const entry of entries) {
    balance += entry.kind === 'open' || entry.kind === 'transfer-in' ? entry.amount : -entry.amount;
  }
  return balance;
}

export interface AccountView {
  id: string;
  balance: number;
  /** What the ledger says the balance should be. */
  ledgerBalance: number;
  consistent: boolean;
  withdrawals: { count: number; total: number };
}

export function viewOf(id: string, balance: number, entries: readonly LedgerEntry[]): AccountView {
  const withdrawals = entries.filter((entry) => entry.kind === 'withdraw');
  const expected = ledgerBalance(entries);
  return {
    id,
    balance,
    ledgerBalance: expected,
    consistent: expected === balance,
    withdrawals: { count: withdrawals.length, total: withdrawals.reduce((sum, entry) => sum + entry.amount, 0) },
  };
}
