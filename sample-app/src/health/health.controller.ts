import { Controller, Get } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { RedlockHealthIndicator } from 'nestjs-redlock/terminus';
import type { SampleConfig } from '../config/configuration.js';
import { StoreHealthIndicator } from './store.health.js';

/**
 * `GET /health` is readiness: 200 while the store answers and a quorum of lock masters can
 * grant a lock now, 503 otherwise with why (masters down, or back from a restart and in
 * quarantine, and for how long). `GET /health/live` is liveness: it never depends on Redis, since
 * restarting the replica would not bring a store or a master back.
 */
@Controller('health')
export class HealthController {
  private readonly replica: string;

  constructor(
    private readonly health: HealthCheckService,
    private readonly store: StoreHealthIndicator,
    private readonly redlock: RedlockHealthIndicator,
    config: ConfigService<SampleConfig, true>,
  ) {
    this.replica = config.get('http.replicaId', { infer: true });
  }

  @Get()
  @HealthCheck()
  ready() {
    return this.health.check([() => this.store.isHealthy('store'), () => this.redlock.isHealthy('redlock')]);
  }

  @Get('live')
  live() {
    return { status: 'ok', replica: this.replica };
  }
}
