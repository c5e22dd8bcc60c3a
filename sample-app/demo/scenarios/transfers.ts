import { call, statusCounts } from '../http.js';
import { sum } from '../stats.js';
import { accountIds, openAccounts, viewAccounts } from './accounts.js';

export interface TransferPlan {
  prefix: string;
  accounts: number;
  opening: number;
  count: number;
}

export interface TransferResult {
  statuses: Record<number, number>;
  done: number;
  totalBefore: number;
  totalAfter: number;
  /** Everything wrong, naming the account; empty when every balance is exactly right. */
  wrong: string[];
}

/**
 * Sends `count` transfers at once between a few accounts (so most pairs collide), over all
 * replicas. Each transfer locks both of its accounts at once with RedlockService. Afterwards
 * money must be conserved, and each balance must be exactly its opening plus what the accepted
 * transfers moved in, minus what they moved out, with a ledger that agrees.
 */
export async function transferBurst(replicas: readonly string[], plan: TransferPlan): Promise<TransferResult> {
  const ids = accountIds(plan.prefix, plan.accounts);
  await openAccounts(replicas[0]!, ids, plan.opening);
  const random = lcg(42); // same transfers every run
  const transfers = Array.from({ length: plan.count }, () => {
    const from = Math.floor(random() * ids.length);
    const to = (from + 1 + Math.floor(random() * (ids.length - 1))) % ids.length;
    return { from: ids[from]!, to: ids[to]!, amount: 10 * (1 + Math.floor(random() * 5)) };
  });
  const answers = await Promise.all(transfers.map((transfer, i) => call('POST', `${replicas[i % replicas.length]}/transfers`, transfer)));
  const expected = new Map(ids.map((id) => [id, plan.opening]));
  transfers.forEach((transfer, i) => {
    if (answers[i]!.status !== 201) return;
    expected.set(transfer.from, expected.get(transfer.from)! - transfer.amount);
    expected.set(transfer.to, expected.get(transfer.to)! + transfer.amount);
  });
  const views = await viewAccounts(replicas[0]!, ids);
  const wrong: string[] = [];
  for (const view of views) {
    if (view.balance !== expected.get(view.id)) wrong.push(`${view.id}: balance ${view.balance}, the accepted transfers say ${expected.get(view.id)}`);
    if (!view.consistent) wrong.push(`${view.id}: balance ${view.balance} but the ledger adds up to ${view.ledgerBalance}`);
    if (view.balance < 0) wrong.push(`${view.id}: negative balance ${view.balance}`);
  }
  const totalAfter = sum(views.map((view) => view.balance));
  if (totalAfter !== ids.length * plan.opening) wrong.push(`money not conserved: ${ids.length * plan.opening} before, ${totalAfter} after`);
  const statuses = statusCounts(answers);
  return { statuses, done: statuses[201] ?? 0, totalBefore: ids.length * plan.opening, totalAfter, wrong };
}

/** A tiny seeded generator, so the demo sends the same transfers every time. */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}
