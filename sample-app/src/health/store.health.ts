import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { Store } from '../store/store.js';

/** The wallet store answers PING: without it no request can be served, locked or not. */
@Injectable()
export class StoreHealthIndicator {
  constructor(
    private readonly store: Store,
    private readonly indicators: HealthIndicatorService,
  ) {}

  async isHealthy(key = 'store') {
    const session = this.indicators.check(key);
    const answer = await this.store.redis.ping().catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
    return answer === 'PONG' ? session.up() : session.down({ message: answer });
  }
}
