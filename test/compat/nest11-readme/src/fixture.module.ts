import { Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { AppModule } from './app.module';
import { HealthModule } from './health.module';
import { ReportsJob } from './reports.job';

// The README's AppModule (written into src/ by test/compat/run.mjs, as are the README's job and
// docs/production.md's health module) with what its other sections add: the job across
// replicas on @nestjs/schedule, the health check on @nestjs/terminus, and @nestjs/config, each
// at the Nest 11 major the README names.
@Module({
  imports: [ConfigModule.forRoot({ ignoreEnvFile: true }), ScheduleModule.forRoot(), AppModule, HealthModule],
  providers: [ReportsJob],
})
export class FixtureModule {}
