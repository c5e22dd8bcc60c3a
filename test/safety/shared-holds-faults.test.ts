import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { checkHistory } from './support/checker.js';
import { now } from './support/history.js';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { loopWorker, mostAtOnce, range, sharedHolds, shuffled, WEIGHTED } from './support/scenario-kit.js';

// The kill-masters faults for a semaphore and a read-write lock: workers in 3 processes loop on
// one resource as permits of limit 2, as weighted permits (1 to 3 of 4), or as readers (70%) and writers; each episode kills 2 of
// the 5 masters, then brings them back empty (the restart quarantine, on, keeps them out for a
// ttl). The checker judges every hold: never more than 2 permits, never a writer with anyone,
// fences rising, writers' read-modify-writes never lost. The control that the checker sees
// these faults is in shared-holds-restart.test.ts (quarantine off: flagged).

const TTL = 1_000;
const SHORT_MS = 4_000;
const PROGRESS = 5;
const DWELL_MS = 400;

const fixture = scenarioFixture();

const SHAPES = [
  { name: 'semaphore', title: 'Semaphore (limit 2)', shared: { limit: 2 } },
  { name: 'weighted', title: 'Weighted permits (limit 4, 1 to 3 each)', shared: WEIGHTED.shared },
  { name: 'read-write', title: 'Read-write lock (70% readers)', shared: { readShare: 0.7 } },
] as const;

for (const shape of SHAPES) {
  it(`${shape.name}: stays within its rules and live with 2 of 5 masters down, and after they come back empty`, async () => {
    const masters = fixture.masters();
    const scenario = fixture.start({
      id: `shared-${shape.name}-kill-masters`,
      title: `${shape.title}: kill 2 of 5 masters, bring them back empty`,
      expected: 'safe',
      method:
        `3 processes x 2 workers loop on one resource (${JSON.stringify(shape.shared)}, ttl 1 s, extend once per cycle, quarantine on). ` +
        'Each episode: SIGKILL 2 random masters, then restart both without their data.',
    });
    const resource = `shared-${shape.name}`;
    await Promise.all(
      range(3).map((p) =>
        scenario.spawn(loopWorker(`w${p}`, masters.urls(), { resources: [resource], ttlMs: [TTL], holdMs: 10, extend: true, shared: shape.shared })),
      ),
    );
    const progress = async (since: bigint, timeoutMs: number) => {
      const live = await scenario.until(() => scenario.holdsSince(since) >= PROGRESS, timeoutMs);
      await sleep(DWELL_MS); // the workers keep going under the same conditions for a while
      return live;
    };
    const episodes = { run: 0, liveBefore: 0, liveTwoDown: 0, liveAgain: 0 };
    const endAt = performance.now() + runFor(SHORT_MS);
    do {
      episodes.run++;
      if (await progress(now(), 15_000)) episodes.liveBefore++;
      const [a, b] = shuffled(range(5));
      await Promise.all([masters.kill(a!), masters.kill(b!)]);
      scenario.fault(`kill masters ${a} and ${b}`);
      if (await progress(now(), 10_000)) episodes.liveTwoDown++;
      await Promise.all([a!, b!].map((i) => masters.start(i)));
      scenario.fault(`restart masters ${a} and ${b} empty`);
      if (await progress(now(), TTL * 3 + 10_000)) episodes.liveAgain++;
    } while (performance.now() < endAt);
    await scenario.stopWorkers();

    const holds = checkHistory(scenario.history.events()).holds.filter((h) => h.resource === resource);
    const permits = shape.name !== 'read-write';
    const together = mostAtOnce(holds.filter((h) => (permits ? h.limit > 1 : h.mode === 'read')));
    scenario.expect(`live before the faults (${episodes.liveBefore}/${episodes.run} episodes)`, episodes.liveBefore === episodes.run);
    scenario.expect(`live with 2 of 5 down (${episodes.liveTwoDown}/${episodes.run} episodes)`, episodes.liveTwoDown === episodes.run);
    scenario.expect(`live again once both are back (${episodes.liveAgain}/${episodes.run} episodes)`, episodes.liveAgain === episodes.run);
    scenario.expect(`${permits ? 'permits' : 'readers'} did hold together (at most ${together} at once)`, together > 1);
    if (!permits) {
      const joined = sharedHolds(holds);
      scenario.expect(`readers of one process shared a hold (${joined} holds under another's token)`, joined > 0);
    }
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS) * 2);
}
