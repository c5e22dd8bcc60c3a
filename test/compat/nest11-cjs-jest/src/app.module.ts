import { Module } from '@nestjs/common';
import { RedlockModule } from 'nestjs-redlock';
import { AppController, ReportService } from './app.controller';

function redlockNodes(): string[] {
  const nodes = process.env.REDLOCK_NODES;
  if (!nodes) throw new Error('set REDLOCK_NODES to comma-separated redis:// URLs of the masters');
  return nodes.split(',');
}

@Module({
  // The masters are throw-away servers started just before the app: no quarantine wait.
  imports: [RedlockModule.forRoot({ nodes: redlockNodes(), restartQuarantineMs: false })],
  controllers: [AppController],
  providers: [ReportService],
})
export class AppModule {}
