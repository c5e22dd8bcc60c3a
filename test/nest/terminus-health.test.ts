import 'reflect-metadata';
import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule } from '../../lib/index.js';
import { RedlockHealthIndicator } from '../../lib/terminus/index.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, directClients, fleetOptions, urlOf } from './nest-helpers.js';

// RedlockHealthIndicator on the real @nestjs/terminus: a HealthCheckService route over 5 real
// masters, up while a quorum can vote, down (503) when it cannot, saying why.

let fleet: RedisFleet;

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
});

afterEach(async () => {
  await closeAll();
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});

afterAll(async () => {
  await fleet?.stopAll();
});

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redlock: RedlockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.redlock.isHealthy()]);
  }
}

async function healthApp(options: { restartQuarantineMs?: number | false } = {}) {
  const app = await createApp(
    {
      imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), ...options, isGlobal: true }), TerminusModule],
      controllers: [HealthController],
      providers: [RedlockHealthIndicator],
    },
    { listen: true },
  );
  return () => request(urlOf(app)).get('/health');
}

interface Body {
  status: string;
  info?: Record<string, { status: string; voting: number; quorum: number; masters: Record<string, Record<string, unknown>> }>;
  error?: Record<string, { status: string; voting: number; message: string; availableInMs?: number; masters: Record<string, Record<string, unknown>> }>;
}

describe('RedlockHealthIndicator', () => {
  it('is up with 5 of 5 and with 3 of 5 masters, down with 2 of 5, and writes no key', async () => {
    const health = await healthApp();
    const all = await health().expect(200);
    const up = (all.body as Body).info!['redlock']!;
    expect(up).toMatchObject({ status: 'up', voting: 5, quorum: 3 });
    const first = up.masters[`127.0.0.1:${fleet.nodes[0]!.port}`]!;
    expect(first).toMatchObject({ reachable: true, votes: true });
    expect(typeof first['roundTripMs']).toBe('number');

    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    await expect.poll(async () => ((await health()).body as Body).info?.['redlock']?.voting).toBe(3);
    expect((await health()).status).toBe(200);

    await fleet.kill(2);
    const down = await health();
    expect(down.status).toBe(503);
    const failed = (down.body as Body).error!['redlock']!;
    expect(failed).toMatchObject({ status: 'down', voting: 2 });
    expect(failed.message).toMatch(/^2 of 5 masters can vote, a lock needs 3; 3 unreachable/);
    expect(failed.masters[`127.0.0.1:${fleet.nodes[2]!.port}`]).toMatchObject({ reachable: false, votes: false });

    const alive = directClients(fleet).slice(3);
    expect(await Promise.all(alive.map((client) => client.dbsize()))).toEqual([0, 0]);
  });

  it('refuses options of the wrong type with InvalidArgumentError naming them, rather than probing with them', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), isGlobal: true }), TerminusModule], providers: [RedlockHealthIndicator] });
    const indicator = app.get(RedlockHealthIndicator);
    for (const [options, argument] of [[{ timeoutMs: '500' }, 'timeoutMs'], [{ timeoutMs: 0 }, 'timeoutMs'], [{ timeoutMs: 2 ** 31 }, 'timeoutMs'], [null, 'options']] as const) {
      await expect(indicator.isHealthy('redlock', options as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument });
    }
  });

  it('is down while a majority is in restart quarantine, says for how long, and up again after', async () => {
    const health = await healthApp({ restartQuarantineMs: 2_000 });
    // The fleet itself may be younger than the window: wait until it has aged past it.
    await expect.poll(async () => (await health()).status, { timeout: 10_000, interval: 100 }).toBe(200);
    await Promise.all([fleet.restart(0), fleet.restart(1), fleet.restart(2)]);
    const quarantined = async () => ((await health()).body as Body).error?.['redlock'];
    // The three reconnect one by one: wait until all three are back and judged.
    await expect.poll(async () => (await quarantined())?.message, { timeout: 10_000, interval: 50 }).toMatch(/3 in restart quarantine/);
    const down = (await quarantined())!;
    expect(down.message).toMatch(/^2 of 5 masters can vote, a lock needs 3; 3 in restart quarantine \(recently restarted\), the last for \d+ ms more; locking resumes in \d+ ms$/);
    const restarted = down.masters[`127.0.0.1:${fleet.nodes[0]!.port}`]!;
    expect(restarted).toMatchObject({ reachable: true, votes: false });
    expect(restarted['quarantinedForMs']).toBeGreaterThan(0);
    expect(restarted['quarantinedForMs']).toBeLessThanOrEqual(2_000);
    // Two vote now: the first of the three to come out of quarantine makes the quorum.
    const remaining = fleet.nodes.slice(0, 3).map((node) => down.masters[`127.0.0.1:${node.port}`]!['quarantinedForMs'] as number);
    expect(down.availableInMs).toBe(Math.min(...remaining));
    await expect.poll(async () => (await health()).status, { timeout: 10_000, interval: 100 }).toBe(200);
  });
});
