import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockHeldError, QuorumUnreachableError, WithLock } from 'nestjs-redlock';
import type { SampleConfig } from '../config/configuration.js';
import { Store } from '../store/store.js';
import { AccountsRepository } from '../wallet/accounts.repository.js';
import { ReconcileLog, type ReconcileRun } from './reconcile-log.js';

/**
 * Checks every few seconds that each account's balance matches its ledger. Every replica has the
 * timer, but a run must not overlap another one anywhere: the whole run holds the 'reconcile'
 * lock, with the fail policy, so a replica that finds it taken skips this turn instead of
 * queueing behind it (the replica that holds it is doing the work already).
 */
@Injectable()
export class ReconcileJob implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ReconcileJob.name);
  private readonly settings: SampleConfig['reconcile'];
  private readonly replicaId: string;
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> | undefined;

  constructor(
    private readonly accounts: AccountsRepository,
    private readonly log: ReconcileLog,
    private readonly store: Store,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.settings = config.get('reconcile', { infer: true });
    this.replicaId = config.get('http.replicaId', { infer: true });
  }

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => this.tick(), this.settings.everyMs);
  }

  /** Stops the timer and lets a run in progress finish (its lock is released as usual). */
  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    await this.current;
  }

  /**
   * One run, under the lock. ttlMs only bounds how long a crashed replica could block the job:
   * the lock is extended while the run lasts. (A decorator's options are fixed at compile time,
   * so this one is a constant rather than configuration.)
   */
  @WithLock('reconcile', { onLocked: 'fail', ttlMs: 5_000 })
  async reconcile(): Promise<ReconcileRun> {
    const startUs = await this.store.nowUs();
    const ids = await this.accounts.ids();
    const views = await Promise.all(ids.map((id) => this.accounts.view(id)));
    const outOfBalance = views.filter((view) => view && !view.consistent).map((view) => view!.id);
    // Stands for the slow part of a real reconciliation (comparing with a bank statement, say):
    // long enough that two unlocked runs on different replicas would overlap.
    await sleep(this.settings.workMs);
    const run: ReconcileRun = { replica: this.replicaId, startUs, endUs: await this.store.nowUs(), checked: ids.length, outOfBalance };
    await this.log.recordRun(run);
    return run;
  }

  private tick(): void {
    if (this.current) return; // this replica's previous run is still going
    this.current = this.reconcile()
      .then(
        (run) => {
          const problems = run.outOfBalance.length ? `; out of balance: ${run.outOfBalance.join(', ')}` : '';
          this.logger.log(`reconciled ${run.checked} accounts${problems}`);
        },
        (error: unknown) => this.skipped(error),
      )
      .finally(() => (this.current = undefined));
  }

  private async skipped(error: unknown): Promise<void> {
    if (error instanceof LockHeldError) {
      this.logger.log('skipped: another replica runs it');
      await this.log.recordSkip(this.replicaId, 'held').catch(() => undefined);
    } else if (error instanceof QuorumUnreachableError) {
      this.logger.warn('skipped: too few lock masters reachable');
      await this.log.recordSkip(this.replicaId, 'unavailable').catch(() => undefined);
    } else {
      this.logger.error(`reconciliation failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
