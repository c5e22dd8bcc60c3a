import { type MiddlewareConsumer, Module, type NestModule } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { RedlockExceptionFilter, RedlockModule } from 'nestjs-redlock';
import { IdleConnectionCloser } from './common/idle-connection-closer.js';
import { RequestTimingMiddleware } from './common/request-timing.js';
import { configuration, type SampleConfig } from './config/configuration.js';
import { redlockOptions } from './config/redlock-options.js';
import { HealthModule } from './health/health.module.js';
import { ReconcileModule } from './reconcile/reconcile.module.js';
import { StoreModule } from './store/store.module.js';
import { WalletModule } from './wallet/wallet.module.js';

@Module({
  imports: [
    // Environment variables only: every replica is configured by whoever starts it.
    ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true, load: [() => configuration()] }),
    RedlockModule.forRootAsync({
      isGlobal: true,
      inject: [ConfigService],
      useFactory: (config: ConfigService<SampleConfig, true>) => redlockOptions(config),
    }),
    // Runs the reconciliation job's @Interval on every replica; its lock picks the one that works.
    ScheduleModule.forRoot(),
    StoreModule,
    WalletModule,
    ReconcileModule,
    HealthModule,
  ],
  providers: [{ provide: APP_FILTER, useClass: RedlockExceptionFilter }, IdleConnectionCloser],
})
export class AppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestTimingMiddleware).forRoutes('*path');
  }
}
