import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, QuorumUnreachableError } from '../../lib/index.js';
import { SkippedCalls } from '../../lib/skipped-calls.js';
import { disconnectAll, PATIENT, separateEngine } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(1);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

/** What a job's skips say, by level. */
function recording() {
  const lines = { warn: [] as string[], log: [] as string[] };
  return { lines, logger: { warn: (message: string) => void lines.warn.push(message), log: (message: string) => void lines.log.push(message) } };
}

/**
 * The two ways an engine says "held": refused by the masters (another engine holds the key), and
 * refused in this process, without asking them (an earlier call of the process is still in line).
 */
async function heldErrors(): Promise<{ byMasters: LockHeldError; inProcess: LockHeldError }> {
  const { redlock: holder } = await separateEngine(fleet.urls(), opened, PATIENT);
  const { redlock } = await separateEngine(fleet.urls(), opened, PATIENT);
  const held = await holder.acquire('job', 30_000);
  const byMasters = await redlock.acquire('job', 5_000, { retryCount: 0 }).catch((error: unknown) => error);
  // This caller waits in the process's line for the holder on the masters...
  const waiting = redlock.acquire('job', 5_000, { waitTimeoutMs: 30_000 });
  // ...so the next one that will not wait is refused behind it, before any master is asked.
  const inProcess = await redlock.acquire('job', 5_000, { retryCount: 0 }).catch((error: unknown) => error);
  await held.release();
  await (await waiting).release();
  expect(byMasters).toBeInstanceOf(LockHeldError);
  expect(inProcess).toBeInstanceOf(LockHeldError);
  return { byMasters: byMasters as LockHeldError, inProcess: inProcess as LockHeldError };
}

describe("onLocked: 'skip' reports an episode of unavailability once", () => {
  it('a call refused in its own process (no master asked) does not end the episode; masters answering "held" do', async () => {
    const { byMasters, inProcess } = await heldErrors();
    expect(inProcess.nodes).toEqual([]);
    expect(byMasters.nodes.length).toBeGreaterThan(0);
    const quarantined = new QuorumUnreachableError(['job'], 1, [{ node: '127.0.0.1:1', status: 'quarantined', quarantinedForMs: 2_000 }]);
    const { lines, logger } = recording();
    const skips = new SkippedCalls('Jobs.settle', logger);

    skips.unavailable(quarantined);
    // A tick's call overlapping the one before, still waiting for its masters, on a loaded machine.
    skips.heldElsewhere(inProcess);
    skips.unavailable(quarantined);
    expect(lines.warn).toHaveLength(1);
    expect(lines.warn[0]).toMatch(/^Jobs\.settle skipped: the lock on job cannot be taken: .*restart quarantine/);
    expect(lines.log).toEqual([]);

    // The masters answered: the episode is over, said once; the next failure starts another.
    skips.heldElsewhere(byMasters);
    expect(lines.log).toEqual(['Jobs.settle: locks can be taken again; its calls run']);
    skips.unavailable(quarantined);
    expect(lines.warn).toHaveLength(2);
  });
});
