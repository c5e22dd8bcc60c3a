import { Injectable } from '@nestjs/common';
import { Store } from '../store/store.js';

/** One reconciliation run, timed on the store's clock so runs on different replicas compare. */
export interface ReconcileRun {
  replica: string;
  startUs: number;
  endUs: number;
  checked: number;
  /** Accounts whose balance disagrees with their ledger. */
  outOfBalance: string[];
}

const RUNS = 'reconcile:runs';
const SKIPS = 'reconcile:skips';

/** The job's history in the shared store: what ran where and when, and how often it was skipped. */
@Injectable()
export class ReconcileLog {
  constructor(private readonly store: Store) {}

  async recordRun(run: ReconcileRun): Promise<void> {
    await this.store.redis.rpush(RUNS, JSON.stringify(run));
  }

  async recordSkip(replica: string): Promise<void> {
    await this.store.redis.hincrby(SKIPS, replica, 1);
  }

  async history(): Promise<{ runs: ReconcileRun[]; skips: Record<string, number> }> {
    const [runs, skips] = await Promise.all([this.store.redis.lrange(RUNS, 0, -1), this.store.redis.hgetall(SKIPS)]);
    return {
      runs: runs.map((run) => JSON.parse(run) as ReconcileRun),
      skips: Object.fromEntries(Object.entries(skips).map(([key, count]) => [key, Number(count)])),
    };
  }
}
