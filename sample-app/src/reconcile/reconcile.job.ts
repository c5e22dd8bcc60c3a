import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Interval } from '@nestjs/schedule';
import { setTimeout as sleep } from 'node:timers/promises';
import { WithLock } from 'nestjs-redlock';
import { reconcileEveryMs, type SampleConfig } from '../config/configuration.js';
import { Store } from '../store/store.js';
import { AccountsRepository } from '../wallet/accounts.repository.js';
import { ReconcileLog, type ReconcileRun } from './reconcile-log.js';

/**
 * Checks every few seconds that each account's balance matches its ledger, as the README
 * advises a job across replicas: every replica's `@Interval` fires, and the run holds the
 * 'reconcile' lock with `onLocked: 'skip'`, so a replica that finds it taken (by another replica,
 * or by its own previous run still going) skips this turn instead of queueing behind it.
 */
@Injectable()
export class ReconcileJob implements OnModuleDestroy {
  private readonly logger = new Logger(ReconcileJob.name);
  private readonly settings: SampleConfig['reconcile'];
  private readonly replicaId: string;
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    private readonly accounts: AccountsRepository,
    private readonly log: ReconcileLog,
    private readonly store: Store,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.settings = config.get('reconcile', { infer: true });
    this.replicaId = config.get('http.replicaId', { infer: true });
  }

  /** Lets runs in progress finish (their locks are released as usual); no new one starts. */
  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  /**
   * One run, under the lock. ttlMs only bounds how long a crashed replica could block the job:
   * the lock is extended while the run lasts. (A decorator's options are fixed at compile time,
   * so this one is a constant rather than configuration.)
   */
  @WithLock('reconcile', { onLocked: 'skip', ttlMs: 5_000 })
  async reconcile(): Promise<ReconcileRun | undefined> {
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

  /**
   * The timer's turn: one run, or a skip recorded in the job's history. With `onLocked: 'skip'` the
   * call returns undefined both when another owner holds the lock and when too few masters can
   * grant it (out of reach, or in restart quarantine after a fresh deploy): the module warns of the
   * latter once per episode, so a skip is no failure of the job.
   */
  @Interval('reconcile', reconcileEveryMs())
  async tick(): Promise<void> {
    if (this.stopping) return;
    const turn = this.reconcile().then(
      (run) => this.ran(run),
      (error: unknown) => this.failed(error),
    );
    this.running.add(turn);
    await turn.finally(() => this.running.delete(turn));
  }

  private async ran(run: ReconcileRun | undefined): Promise<void> {
    if (!run) {
      this.logger.log('skipped: the lock was not taken (another replica, or this one\'s previous run, holds it; or too few masters)');
      await this.log.recordSkip(this.replicaId).catch(() => undefined);
      return;
    }
    const problems = run.outOfBalance.length ? `; out of balance: ${run.outOfBalance.join(', ')}` : '';
    this.logger.log(`reconciled ${run.checked} accounts${problems}`);
  }

  private failed(error: unknown): void {
    this.logger.error(`reconciliation failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
