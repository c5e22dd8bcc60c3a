import { Controller, Get, ServiceUnavailableException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { RedlockService } from 'nestjs-redlock';
import type { SampleConfig } from '../config/configuration.js';
import { Store } from '../store/store.js';

/**
 * Ready when the store answers (503 otherwise). The lock masters are reported but do not fail
 * the check: without a quorum the app still serves reads and answers locked routes with a clean
 * 503, and restarting the replica would not bring the masters back.
 */
@Controller('health')
export class HealthController {
  private readonly replica: string;

  constructor(
    private readonly store: Store,
    private readonly redlock: RedlockService,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.replica = config.get('http.replicaId', { infer: true });
  }

  @Get()
  async check() {
    const [store, locks] = await Promise.all([this.storeStatus(), this.lockStatus()]);
    const body = { status: store !== 'up' ? 'down' : locks === 'ok' ? 'ok' : 'degraded', replica: this.replica, store, locks };
    if (store !== 'up') throw new ServiceUnavailableException(body);
    return body;
  }

  private async storeStatus(): Promise<'up' | 'down'> {
    return (await this.store.redis.ping().catch(() => 'down')) === 'PONG' ? 'up' : 'down';
  }

  /**
   * Whether a quorum of lock masters grants a lock right now (released at once). With the
   * module's default ttl, not a short one: the restart quarantine's window is the longest ttl
   * the engine has used, so a short probe could pass where the app's real locks are refused.
   */
  private async lockStatus(): Promise<'ok' | 'unavailable'> {
    try {
      const lock = await this.redlock.tryAcquire(`health:${this.replica}`);
      await lock?.release(); // null: a concurrent health check holds it, so the masters answered
      return 'ok';
    } catch {
      return 'unavailable';
    }
  }
}
