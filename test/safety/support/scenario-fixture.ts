import { afterAll, beforeAll } from 'vitest';
import { RedisFleet } from '../../support/redis-fleet.js';
import { SafetyRun, type ScenarioSpec } from './safety-run.js';

export interface ScenarioFixture {
  /** The file's fleet of real masters, started before its tests. */
  masters(): RedisFleet;
  /** The scenario's run: its workers and history, disposed after the file even when a test fails. */
  start(spec: ScenarioSpec): SafetyRun;
}

/** One fleet per scenario file and the run using it, both torn down after the file. */
export function scenarioFixture(masterCount = 5): ScenarioFixture {
  let fleet: RedisFleet | undefined;
  let run: SafetyRun | undefined;
  beforeAll(async () => {
    fleet = await RedisFleet.start(masterCount);
  });
  afterAll(async () => {
    await run?.dispose();
    await fleet?.stopAll();
  });
  return {
    masters: () => fleet!,
    start: (spec) => (run = new SafetyRun(spec)),
  };
}
