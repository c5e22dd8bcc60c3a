import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { connectMasters, disconnectAll } from '../../support/masters.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { SafetyRun, type ScenarioSpec } from './safety-run.js';

export interface ScenarioFixture {
  /** The file's fleet of real masters, started before its tests. */
  masters(): RedisFleet;
  /** With `proxied`: one TCP proxy in front of each master, for latency and lost replies. */
  proxies(): TcpProxy[];
  /** With `proxied`: a plain client per master, bypassing the proxies, to inspect the keys. */
  direct(): Redis[];
  /** The scenario's run: its workers and history, disposed after the file even when a test fails. */
  start(spec: ScenarioSpec): SafetyRun;
}

/** One fleet per scenario file (5 masters unless told, behind proxies if asked) and the run using it, all torn down after the file. */
export function scenarioFixture({ proxied = false, masters = 5 }: { proxied?: boolean; masters?: number } = {}): ScenarioFixture {
  let fleet: RedisFleet | undefined;
  let proxies: TcpProxy[] = [];
  let direct: Redis[] = [];
  let run: SafetyRun | undefined;
  beforeAll(async () => {
    fleet = await RedisFleet.start(masters);
    if (!proxied) return;
    proxies = await Promise.all(fleet.nodes.map((node) => TcpProxy.start({ host: node.host, port: node.port })));
    direct = await connectMasters(fleet.urls());
  });
  afterAll(async () => {
    await run?.dispose();
    disconnectAll(direct);
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await fleet?.stopAll();
  });
  return {
    masters: () => fleet!,
    proxies: () => proxies,
    direct: () => direct,
    start: (spec) => (run = new SafetyRun(spec)),
  };
}
