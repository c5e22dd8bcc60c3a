import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RedlockHealthIndicator } from 'nestjs-redlock/terminus';
import { HealthController } from './health.controller.js';
import { StoreHealthIndicator } from './store.health.js';

@Module({
  // A failed readiness check is an answer, not an application error: the 503 body says why.
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [RedlockHealthIndicator, StoreHealthIndicator],
})
export class HealthModule {}
