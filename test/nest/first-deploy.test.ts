import 'reflect-metadata';
import { Controller, Get, Injectable, Param, type INestApplication, type LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, WithLock } from '../../lib/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { urlOf } from './nest-helpers.js';

/**
 * A first deployment on fresh masters whose app declares, with @WithLock, a ttl longer than the
 * module's defaultTtlMs. The restart quarantine must cover that ttl (a master that restarted may
 * have forgotten such a lock), so the bootstrap announcement must name the time it ends: the one
 * computed from defaultTtlMs alone is too early. And it is one WARN line, the per-master detail
 * at debug.
 */
let fleet: RedisFleet;
const apps: INestApplication[] = [];
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

@Injectable()
class SettlementJob {
  @WithLock('settlement', { ttlMs: 600_000, onLocked: 'skip' })
  async settle() {
    return 'settled';
  }
}

@Controller('orders')
class OrdersController {
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
  urls: string[],
  metadata: { providers?: any[]; controllers?: any[] },
  defaultTtlMs: number,
): Promise<{ app: INestApplication; logger: RecordingLogger }> {
  const logger = new RecordingLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ nodes: urls, defaultTtlMs })],
    ...metadata,
  })
    .setLogger(logger)
    .compile();
  const app = moduleRef.createNestApplication({ logger });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return { app, logger };
}

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
    const { logger } = await start(fleet.urls(), { providers: [SettlementJob] }, 2_000);
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
    const { app, logger } = await start(fresh.urls(), { controllers: [OrdersController] }, 1_000);
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
