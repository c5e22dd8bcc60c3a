import { expectOk } from '../http.js';

/** What GET /accounts/:id answers (see the sample app's ledger.ts). */
export interface AccountView {
  id: string;
  balance: number;
  ledgerBalance: number;
  consistent: boolean;
  withdrawals: { count: number; total: number };
}

export function accountIds(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`);
}

export async function openAccounts(url: string, ids: readonly string[], balance: number): Promise<void> {
  await Promise.all(ids.map((id) => expectOk('PUT', `${url}/accounts/${id}`, { balance })));
}

export async function viewAccounts(url: string, ids: readonly string[]): Promise<AccountView[]> {
  return Promise.all(ids.map((id) => expectOk<AccountView>('GET', `${url}/accounts/${id}`)));
}
