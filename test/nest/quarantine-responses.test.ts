import 'reflect-metadata';
import { Controller, Get, Injectable, Param, type INestApplication, type LoggerService, type Type } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, WithLock } from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { urlOf } from './nest-helpers.js';

/**
 * A first deployment as a user makes it: fresh masters, the restart quarantine left on. The app
 * says at bootstrap, in one WARN line (the per-master detail at debug), when locking becomes
 * available and why; a route that will not wait answers 503 with a Retry-After of the remaining
 * quarantine, not a bare "too few servers". The quarantine covers the longest ttl the app
 * declares, a @WithLock ttl longer than defaultTtlMs included, and the announcement names its end.
 */
let fleet: RedisFleet;
const apps: INestApplication[] = [];
/** Fleets a test starts for itself, fresh: stopped after it. */
const fleets: RedisFleet[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(fleets.splice(0).map((extra) => extra.stopAll()));
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

@Injectable()
class SettlementJob {
  @WithLock('settlement', { ttlMs: 600_000, onLocked: 'skip' })
  async settle() {
    return 'settled';
  }
}

/** Its ttl is longer than the module's defaultTtlMs: the quarantine must last that long. */
@Controller('orders')
class LongTtlController {
  @Get(':id')
  @WithLock('order:{0}', { ttlMs: 4_000, onLocked: 'fail' })
  get(@Param('id') id: string) {
    return { id };
  }
}

class RecordingLogger implements LoggerService {
  readonly lines: { level: string; message: string; context?: string }[] = [];
  log = (message: string, context?: string) => void this.lines.push({ level: 'log', message, context });
  warn = (message: string, context?: string) => void this.lines.push({ level: 'warn', message, context });
  error = (message: string, context?: string) => void this.lines.push({ level: 'error', message, context });
  debug = (message: string, context?: string) => void this.lines.push({ level: 'debug', message, context });

  at(level: string): string[] {
    return this.lines.filter((line) => line.level === level).map((line) => line.message);
  }
}

async function start(
  restartQuarantineMs: number | false | undefined,
  { urls = fleet.urls(), defaultTtlMs, controllers = [OrdersController], providers = [] }: StartOptions = {},
): Promise<{ app: INestApplication; logger: RecordingLogger }> {
  const logger = new RecordingLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ nodes: urls, restartQuarantineMs, defaultTtlMs })],
    controllers,
    providers,
  })
    .setLogger(logger)
    .compile();
  const app = moduleRef.createNestApplication({ logger });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return { app, logger };
}

interface StartOptions {
  urls?: string[];
  defaultTtlMs?: number;
  controllers?: Type[];
  providers?: Type[];
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

/** The instant the bootstrap announcement names, and how far ahead it says that is. */
function announced(logger: RecordingLogger): { at: number; inMs: number } {
  const line = logger.at('warn').find((message) => message.startsWith('Locking paused until '));
  expect(line, logger.at('warn').join('\n')).toBeDefined();
  const at = Date.parse(/^Locking paused until (\S+):/.exec(line!)![1]!);
  const inMs = Number(/locking resumes in (\d+) ms/.exec(line!)![1]);
  return { at, inMs };
}

describe('the bootstrap announcement on fresh masters', () => {
  it('names the end of the quarantine that covers the longest @WithLock ttl, in one WARN line', async () => {
    const { logger } = await start(undefined, { providers: [SettlementJob], defaultTtlMs: 2_000 });
    // Every master started less than a minute ago: the 600 s ttl keeps them out for over 9 minutes.
    expect(announced(logger).inMs).toBeGreaterThan(540_000);
    expect(logger.at('warn')).toHaveLength(1);
    expect(logger.at('error')).toEqual([]);
    // Each master's detail, at debug.
    const detail = logger.at('debug').filter((message) => /^Master 127\.0\.0\.1:\d+: in restart quarantine for \d+ ms more/.test(message));
    expect(detail).toHaveLength(3);
  });

  it('names, within a second, the time the first lock of the app can be taken', async () => {
    const fresh = await RedisFleet.start(3);
    fleets.push(fresh);
    const { app, logger } = await start(undefined, { urls: fresh.urls(), controllers: [LongTtlController], defaultTtlMs: 1_000 });
    const { at } = announced(logger);
    const url = urlOf(app);
    let firstAt: number | undefined;
    while (firstAt === undefined) {
      const response = await request(url).get('/orders/1');
      if (response.status === 200) {
        firstAt = Date.now();
      } else {
        expect(response.status).toBe(503);
        expect(Date.now()).toBeLessThan(at + 5_000);
        await sleep(50);
      }
    }
    expect(Math.abs(firstAt - at)).toBeLessThan(1_000);
    // The 503s on the way were the clients' business: the announcement is the only WARN.
    expect(logger.at('warn')).toHaveLength(1);
  });
});
