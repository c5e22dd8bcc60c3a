import { Body, Controller, Get, NotFoundException, Param, Post, Put, Res } from '@nestjs/common';
import { WithLock } from 'nestjs-redlock';
import { reportLockWait, type TimedResponse } from '../common/request-timing.js';
import { ACCOUNT_LOCK } from './account-lock.js';
import { AccountsRepository } from './accounts.repository.js';
import type { AccountView } from './ledger.js';
import { accountId, amount } from './validation.js';
import { WalletService, type WithdrawResult } from './wallet.service.js';

@Controller('accounts')
export class AccountsController {
  constructor(
    private readonly wallet: WalletService,
    private readonly accounts: AccountsRepository,
  ) {}

  /** Opens the account with `balance`, or resets it (balance and ledger). */
  @Put(':id')
  async open(@Param('id') id: string, @Body() body: { balance?: unknown }): Promise<AccountView> {
    await this.accounts.open(accountId(id), amount(body?.balance, 'balance', 0));
    return (await this.accounts.view(id))!;
  }

  @Get(':id')
  async get(@Param('id') id: string): Promise<AccountView> {
    const view = await this.accounts.view(accountId(id));
    if (!view) throw new NotFoundException(`no account ${id}`);
    return view;
  }

  /**
   * One withdrawal per account at a time, across every replica: the key is read from the route
   * parameter (argument 0). A withdrawal that finds the account busy waits for the lock
   * (default policy), up to the engine's waitTimeoutMs, then gets 409. Too few lock masters: 503.
   */
  @Post(':id/withdraw')
  @WithLock(ACCOUNT_LOCK)
  withdraw(@Param('id') id: string, @Body() body: { amount?: unknown }, @Res({ passthrough: true }) res: TimedResponse): Promise<WithdrawResult> {
    reportLockWait(res);
    return this.wallet.withdraw(accountId(id), amount(body?.amount));
  }

  /** The same operation with no lock, deliberately: concurrent calls race and double-spend. */
  @Post(':id/withdraw-unlocked')
  withdrawUnlocked(
    @Param('id') id: string,
    @Body() body: { amount?: unknown },
    @Res({ passthrough: true }) res: TimedResponse,
  ): Promise<WithdrawResult> {
    reportLockWait(res);
    return this.wallet.withdraw(accountId(id), amount(body?.amount));
  }
}
