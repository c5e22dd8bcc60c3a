import { Controller, Get } from '@nestjs/common';
import { ReconcileLog } from './reconcile-log.js';

@Controller('reconcile')
export class ReconcileController {
  constructor(private readonly log: ReconcileLog) {}

  /** Every run (replica, start and end on the store's clock, findings) and skip counts per replica. */
  @Get('runs')
  history() {
    return this.log.history();
  }
}
