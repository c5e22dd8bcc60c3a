import { Controller, Injectable, Param, Post } from '@nestjs/common';
import { RedlockService, WithLock } from 'nestjs-redlock';

// Long enough that a second request sent meanwhile finds the lock held, short enough for CI.
const HOLD_MS = Number(process.env.HOLD_MS ?? 800);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Injectable()
export class ReportService {
  // Runs per day inside the lock right now: anything above 1 means the lock let two in.
  private readonly inside = new Map<string, number>();

  constructor(private readonly redlock: RedlockService) {}

  rebuild(day: string) {
    return this.redlock.using(`report:${day}`, async (signal) => {
      const overlapped = (this.inside.get(day) ?? 0) > 0;
      this.inside.set(day, (this.inside.get(day) ?? 0) + 1);
      try {
        await sleep(200);
        signal.throwIfAborted();
        return { day, overlapped, resources: this.redlock.currentLock()?.resources };
      } finally {
        this.inside.set(day, (this.inside.get(day) ?? 1) - 1);
      }
    });
  }
}

@Controller()
export class AppController {
  constructor(private readonly reports: ReportService) {}

  @Post('orders/:id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  async pay(@Param('id') id: string) {
    await sleep(HOLD_MS);
    return { id, paid: true };
  }

  @Post('reports/:day/rebuild')
  rebuild(@Param('day') day: string) {
    return this.reports.rebuild(day);
  }
}
