import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { ChainableCommander } from 'ioredis';
import type { SampleConfig } from '../config/configuration.js';
import { Store } from '../store/store.js';
import { viewOf, type AccountView, type LedgerEntry } from './ledger.js';

const ACCOUNTS = 'accounts';
const balanceKey = (id: string) => `account:${id}:balance`;
const ledgerKey = (id: string) => `account:${id}:ledger`;

/**
 * Accounts in the shared store. Reads and writes are separate round trips on purpose: the
 * service reads a balance, works, then writes the new one back, the everyday pattern that only
 * a lock makes safe across replicas. Each write (balance + ledger) is one MULTI, so a reader
 * never sees one without the other.
 */
@Injectable()
export class AccountsRepository {
  private readonly replicaId: string;

  constructor(
    private readonly store: Store,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.replicaId = config.get('http.replicaId', { infer: true });
  }

  /** Creates the account, or resets it to `balance` with a fresh ledger. */
  async open(id: string, balance: number): Promise<void> {
    await exec(
      this.store.redis
        .multi()
        .sadd(ACCOUNTS, id)
        .set(balanceKey(id), balance)
        .del(ledgerKey(id))
        .rpush(ledgerKey(id), this.entry('open', balance)),
    );
  }

  /** The current balance, or undefined for an unknown account. */
  async balance(id: string): Promise<number | undefined> {
    const value = await this.store.redis.get(balanceKey(id));
    return value === null ? undefined : Number(value);
  }

  async writeWithdrawal(id: string, newBalance: number, amount: number): Promise<void> {
    await exec(this.store.redis.multi().set(balanceKey(id), newBalance).rpush(ledgerKey(id), this.entry('withdraw', amount)));
  }

  async writeTransfer(from: { id: string; balance: number }, to: { id: string; balance: number }, amount: number): Promise<void> {
    await exec(
      this.store.redis
        .multi()
        .set(balanceKey(from.id), from.balance)
        .rpush(ledgerKey(from.id), this.entry('transfer-out', amount))
        .set(balanceKey(to.id), to.balance)
        .rpush(ledgerKey(to.id), this.entry('transfer-in', amount)),
    );
  }

  /** Balance and ledger read together (one MULTI): a consistent picture of one account. */
  async view(id: string): Promise<AccountView | undefined> {
    const [balance, entries] = (await exec(this.store.redis.multi().get(balanceKey(id)).lrange(ledgerKey(id), 0, -1))) as [
      string | null,
      string[],
    ];
    if (balance === null) return undefined;
    return viewOf(id, Number(balance), entries.map((entry) => JSON.parse(entry) as LedgerEntry));
  }

  async ids(): Promise<string[]> {
    return (await this.store.redis.smembers(ACCOUNTS)).sort();
  }

  private entry(kind: LedgerEntry['kind'], amount: number): string {
    const entry: LedgerEntry = { kind, amount, by: this.replicaId };
    return JSON.stringify(entry);
  }
}

/** Runs a MULTI and returns its replies, throwing the first command error instead of burying it. */
async function exec(multi: ChainableCommander): Promise<unknown[]> {
  const replies = await multi.exec();
  if (!replies) throw new Error('store transaction aborted');
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}
