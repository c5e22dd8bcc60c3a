import { BadRequestException, Body, Controller, Post } from '@nestjs/common';
import { accountId, amount } from './validation.js';
import { WalletService, type TransferResult } from './wallet.service.js';

@Controller('transfers')
export class TransfersController {
  constructor(private readonly wallet: WalletService) {}

  /** Locks both accounts at once (see WalletService.transfer); lock failures map to 409 / 503. */
  @Post()
  transfer(@Body() body: { from?: unknown; to?: unknown; amount?: unknown }): Promise<TransferResult> {
    const from = accountId(body?.from);
    const to = accountId(body?.to);
    if (from === to) throw new BadRequestException('from and to must be different accounts');
    return this.wallet.transfer(from, to, amount(body?.amount));
  }
}
