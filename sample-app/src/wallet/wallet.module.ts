import { Module } from '@nestjs/common';
import { AccountsController } from './accounts.controller.js';
import { AccountsRepository } from './accounts.repository.js';
import { TransfersController } from './transfers.controller.js';
import { WalletService } from './wallet.service.js';

@Module({
  controllers: [AccountsController, TransfersController],
  providers: [AccountsRepository, WalletService],
  exports: [AccountsRepository],
})
export class WalletModule {}
