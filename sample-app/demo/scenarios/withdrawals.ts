import { performance } from 'node:perf_hooks';
import { call, statusCounts, type Answer } from '../http.js';
import { sum } from '../stats.js';
import { accountIds, openAccounts, viewAccounts, type AccountView } from './accounts.js';

export interface WithdrawalPlan {
  /** 'withdraw' is the @WithLock route, 'withdraw-unlocked' the same code with no lock. */
  route: 'withdraw' | 'withdraw-unlocked';
  /** Account ids are `${prefix}-1`, `${prefix}-2`, ... */
  prefix: string;
  accounts: number;
  opening: number;
  /** Withdrawals sent at once to each account. */
  perAccount: number;
  amount: number;
}

export interface AccountOutcome {
  view: AccountView;
  /** Withdrawals the replicas said were done (201). */
  accepted: number;
  /** Accepted withdrawals beyond what the opening balance allowed. */
  doubleSpends: number;
  /** What is wrong with this account, if anything: empty when it is exactly right. */
  wrong: string[];
}

export interface BurstResult {
  plan: WithdrawalPlan;
  answers: Answer[];
  /** From the first request sent to the last answer. */
  elapsedMs: number;
  statuses: Record<number, number>;
  accounts: AccountOutcome[];
  /** Wait before the handler ran, for answers that got as far as a handler. */
  lockWaits: number[];
  accepted: number;
  paidOut: number;
  left: number;
  doubleSpends: number;
  /** Accounts whose balance is not what their ledger adds up to. */
  inconsistent: number;
  wrongAccounts: number;
}

/**
 * Opens the accounts, then sends every withdrawal at once, each account's requests spread
 * round-robin over the replicas, and checks each account against the answers:
 * - no more withdrawals accepted than the opening balance allows (else: double-spends),
 * - balance = opening - accepted withdrawals (else: a lost update, money appeared),
 * - balance = what the ledger adds up to, and the ledger lists exactly the accepted withdrawals.
 */
export async function withdrawalBurst(replicas: readonly string[], plan: WithdrawalPlan): Promise<BurstResult> {
  const ids = accountIds(plan.prefix, plan.accounts);
  await openAccounts(replicas[0]!, ids, plan.opening);
  const started = performance.now();
  const requests: Promise<Answer>[] = [];
  const owners: string[] = [];
  for (let k = 0; k < plan.perAccount; k++) {
    ids.forEach((id, i) => {
      const replica = replicas[(i + k) % replicas.length]!;
      requests.push(call('POST', `${replica}/accounts/${id}/${plan.route}`, { amount: plan.amount }));
      owners.push(id);
    });
  }
  const answers = await Promise.all(requests);
  const elapsedMs = performance.now() - started;
  const views = await viewAccounts(replicas[0]!, ids);
  const allowed = Math.floor(plan.opening / plan.amount);
  const accounts = views.map((view): AccountOutcome => {
    const accepted = answers.filter((answer, i) => owners[i] === view.id && answer.status === 201).length;
    const expected = plan.opening - accepted * plan.amount;
    const wrong: string[] = [];
    if (accepted > allowed) wrong.push(`${accepted - allowed} double-spend(s): ${accepted} withdrawals of ${plan.amount} accepted from ${plan.opening}`);
    if (view.balance !== expected) wrong.push(`balance ${view.balance}, but ${plan.opening} - ${accepted} × ${plan.amount} = ${expected}`);
    if (!view.consistent) wrong.push(`balance ${view.balance} but the ledger adds up to ${view.ledgerBalance}`);
    if (view.withdrawals.count !== accepted) wrong.push(`ledger lists ${view.withdrawals.count} withdrawals, answers said ${accepted}`);
    if (view.balance < 0) wrong.push(`negative balance ${view.balance}`);
    return { view, accepted, doubleSpends: Math.max(0, accepted - allowed), wrong };
  });
  const accepted = sum(accounts.map((account) => account.accepted));
  return {
    plan,
    answers,
    elapsedMs,
    statuses: statusCounts(answers),
    accounts,
    lockWaits: answers.flatMap((answer) => (answer.lockWaitMs === undefined ? [] : [answer.lockWaitMs])),
    accepted,
    paidOut: accepted * plan.amount,
    left: sum(views.map((view) => view.balance)),
    doubleSpends: sum(accounts.map((account) => account.doubleSpends)),
    inconsistent: views.filter((view) => !view.consistent).length,
    wrongAccounts: accounts.filter((account) => account.wrong.length > 0).length,
  };
}

/** The first few problems of a burst, each naming its account, for the failure list. */
export function problems(result: BurstResult, limit = 5): string[] {
  return result.accounts.flatMap((account) => account.wrong.map((why) => `${account.view.id}: ${why}`)).slice(0, limit);
}
