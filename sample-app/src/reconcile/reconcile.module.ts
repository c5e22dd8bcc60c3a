import { Module } from '@nestjs/common';
import { WalletModule } from '../wallet/wallet.module.js';
import { ReconcileController } from './reconcile.controller.js';
import { ReconcileLog } from './reconcile-log.js';
import { ReconcileJob } from './reconcile.job.js';

@Module({
  imports: [WalletModule],
  controllers: [ReconcileController],
  providers: [ReconcileJob, ReconcileLog],
})
export class ReconcileModule {}
