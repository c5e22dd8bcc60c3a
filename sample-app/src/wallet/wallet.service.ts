import { Injectable, NotFoundException, UnprocessableEntityException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedlockService } from 'nestjs-redlock';
import type { SampleConfig } from '../config/configuration.js';
import { accountLock, MIN_VALIDITY_FOR_WRITE_MS } from './account-lock.js';
import { AccountsRepository } from './accounts.repository.js';

export interface WithdrawResult {
  id: string;
  balance: number;
}

export interface TransferResult {
  from: WithdrawResult;
  to: WithdrawResult;
}

/**
 * The wallet's operations. withdraw() is written as if nothing else touched the account while
 * it runs; whether that holds is decided by the caller: the @WithLock route makes it true, the
 * unlocked route does not. transfer() takes its own lock on both accounts.
 */
@Injectable()
export class WalletService {
  private readonly workMs: number;

  constructor(
    private readonly accounts: AccountsRepository,
    private readonly redlock: RedlockService,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.workMs = config.get('wallet.workMs', { infer: true });
  }

  /** Read the balance, check it, work, write the new balance back. */
  async withdraw(id: string, amount: number): Promise<WithdrawResult> {
    const balance = await this.existing(id);
    if (balance < amount) throw new UnprocessableEntityException(`insufficient funds: ${id} has ${balance}`);
    await this.work();
    // Under @WithLock the current lock is the account's: do not write on a lock that is lost or
    // about to expire (another replica may hold it by now). Unlocked, there is nothing to check.
    this.redlock.currentLock(accountLock(id))?.assertValid(MIN_VALIDITY_FOR_WRITE_MS);
    await this.accounts.writeWithdrawal(id, balance - amount, amount);
    return { id, balance: balance - amount };
  }

  /**
   * Moves `amount` between two accounts holding one lock over both (all or nothing): no
   * withdrawal or other transfer can touch either account meanwhile, on any replica. Locking
   * them one after the other instead could deadlock two opposite transfers.
   */
  transfer(fromId: string, toId: string, amount: number): Promise<TransferResult> {
    return this.redlock.using([accountLock(fromId), accountLock(toId)], async (_signal, lock) => {
      const [from, to] = await Promise.all([this.existing(fromId), this.existing(toId)]);
      if (from < amount) throw new UnprocessableEntityException(`insufficient funds: ${fromId} has ${from}`);
      await this.work();
      lock.assertValid(MIN_VALIDITY_FOR_WRITE_MS);
      await this.accounts.writeTransfer({ id: fromId, balance: from - amount }, { id: toId, balance: to + amount }, amount);
      return { from: { id: fromId, balance: from - amount }, to: { id: toId, balance: to + amount } };
    });
  }

  private async existing(id: string): Promise<number> {
    const balance = await this.accounts.balance(id);
    if (balance === undefined) throw new NotFoundException(`no account ${id}`);
    return balance;
  }

  /** Stands for what a real operation does between read and write (a fraud check, a payment provider call). */
  private async work(): Promise<void> {
    if (this.workMs > 0) await sleep(this.workMs);
  }
}
