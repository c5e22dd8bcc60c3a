import 'reflect-metadata';
import { Controller, Get, Param, type INestApplication, type LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, WithLock } from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { urlOf } from './nest-helpers.js';

/**
 * A first deployment as a user makes it: fresh masters, the restart quarantine left on. The app
 * says at bootstrap when locking becomes available and why; a route that will not wait answers
 * 503 with a Retry-After of the remaining quarantine, not a bare "too few servers".
 */
let fleet: RedisFleet;
const apps: INestApplication[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

afterAll(async () => {
  await fleet?.stopAll();
});

@Controller('orders')
class OrdersController {
  @Get(':id')
  @WithLock('order:{0}', { onLocked: 'fail' })
  get(@Param('id') id: string) {
    return { id };
  }
}

class RecordingLogger implements LoggerService {
  readonly lines: { level: string; message: string; context?: string }[] = [];
  log(message: string, context?: string) {
    this.lines.push({ level: 'log', message, context });
  }
  warn(message: string, context?: string) {
    this.lines.push({ level: 'warn', message, context });
  }
  error(message: string, context?: string) {
    this.lines.push({ level: 'error', message, context });
  }
}

async function start(restartQuarantineMs: number | false): Promise<{ app: INestApplication; logger: RecordingLogger }> {
  const logger = new RecordingLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ nodes: fleet.urls(), restartQuarantineMs })],
    controllers: [OrdersController],
  })
    .setLogger(logger)
    .compile();
  const app = moduleRef.createNestApplication({ logger });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return { app, logger };
}

describe('a first deployment with the restart quarantine on', () => {
  it('logs one line at bootstrap saying when locking becomes available and why', async () => {
    const { logger } = await start(600_000);
    const lines = logger.lines.filter((line) => line.context === 'Redlock' && /^Locking /.test(line.message));
    expect(lines).toHaveLength(1);
    expect(lines[0]!.level).toBe('warn');
    expect(lines[0]!.message).toMatch(
      /^Locking paused until \d{4}-\d\d-\d\dT[\d:.]+Z: 0 of 3 masters can vote, a lock needs 2; 3 in restart quarantine \(recently restarted\), the last for \d+ ms more; locking resumes in \d+ ms\. A master that restarted may have forgotten live locks/,
    );
  });

  it('answers a route that will not wait with 503 and a Retry-After of the remaining quarantine', async () => {
    const { app } = await start(600_000);
    const response = await request(urlOf(app)).get('/orders/1').expect(503);
    const retryAfter = Number(response.headers['retry-after']);
    // The second master to come of age makes the quorum: a little under ten minutes from now.
    expect(retryAfter).toBeGreaterThan(590);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(response.body.message).toBe(
      `the lock on order:1 cannot be taken yet: the lock servers restarted recently and can grant locks again in ${retryAfter} s`,
    );
    // The client is told when, not where: no master address in the body.
    expect(JSON.stringify(response.body)).not.toContain('127.0.0.1');
  });

  it('says locking is available when it is, and a 503 for masters that are down has no Retry-After', async () => {
    const { app, logger } = await start(false);
    expect(logger.lines.filter((line) => line.context === 'Redlock' && /^Locking /.test(line.message))).toEqual([
      { level: 'log', message: 'Locking available: 3 of 3 masters can vote, a lock needs 2', context: 'Redlock' },
    ]);
    await request(urlOf(app)).get('/orders/2').expect(200);
    await Promise.all([fleet.stop(0), fleet.stop(1)]);
    try {
      const response = await request(urlOf(app)).get('/orders/2').expect(503);
      expect(response.headers['retry-after']).toBeUndefined();
    } finally {
      await Promise.all([fleet.start(0), fleet.start(1)]);
    }
  });
});
