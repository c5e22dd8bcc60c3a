import { expect, it } from 'vitest';
import { now, nsFromMs } from './support/history.js';
import { failures, runFor, timeoutFor, type WorkerProcess } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { expectSharing, KINDS, loopWorker, range } from './support/scenario-kit.js';

// Many clients start at the same instant on one resource: 4 processes x 8 clients, each client
// with its own engine and connections (as 32 replicas of a service would be), all told to begin
// at one instant on the shared monotonic clock. Votes split across the masters; each client must
// still take the lock exactly once per stampede, one at a time.

const PROCESSES = 4;
const CLIENTS = 8;
const TTL = 1_000;
const SHORT_MS = 3_000;
const LEAD_MS = 300;

const fixture = scenarioFixture();

for (const kind of KINDS) {
  it(`${kind.title}hands the lock to each of many simultaneous clients in turn, never to more at once than its kind admits`, async () => {
    const masters = fixture.masters();
    const scenario = fixture.start({
      id: `thundering-herd${kind.id}`,
      title: `${kind.title}${PROCESSES * CLIENTS} clients starting at the same instant on one resource`,
      expected: 'safe',
      method:
        `${PROCESSES} processes x ${CLIENTS} clients, each with its own engine and connections, all start acquiring one ` +
        `resource at one instant (ttl ${TTL / 1000} s); each takes it once, then the next stampede starts (bare counter fences).`,
    });
    // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
    scenario.forgeWakeups(masters.urls());
    const workers: WorkerProcess[] = await Promise.all(
      range(PROCESSES).map((p) =>
        scenario.spawn(
          loopWorker(`w${p}`, masters.urls(), {
            shared: kind.shared,
            mode: 'herd',
            workers: CLIENTS,
            separateEngines: true,
            resources: ['herd'],
            ttlMs: [TTL],
            engine: { restartQuarantineMs: false, fenceTimeFloor: false },
            waitTimeoutMs: 60_000,
            holdMs: 2,
          }),
        ),
      ),
    );

    let done = new Set<WorkerProcess>();
    scenario.onHerdDone = (worker) => done.add(worker);
    let stampedes = 0;
    let complete = 0;
    const spreads: number[] = [];
    const endAt = performance.now() + runFor(SHORT_MS);
    do {
      stampedes++;
      done = new Set();
      const at = now() + nsFromMs(LEAD_MS);
      for (const worker of workers) worker.send({ type: 'go', at, episode: stampedes });
      scenario.fault(`stampede ${stampedes}: ${PROCESSES * CLIENTS} clients at one instant`, at);
      if (await scenario.until(() => done.size === workers.length, 60_000)) complete++;
      // How close together the first attempts really began.
      const starts = scenario.history
        .events()
        .filter((e) => e.op === 'acquire' && e.phase === 'invoke' && e.t >= at)
        .slice(0, PROCESSES * CLIENTS)
        .map((e) => Number(e.t - at) / 1e6);
      spreads.push(Math.max(...starts) - Math.min(...starts));
    } while (performance.now() < endAt);
    await scenario.stopWorkers();

    const holds = scenario.holdsSince(scenario.startedAt);
    scenario.expect(`every stampede ended with every client served (${complete}/${stampedes})`, complete === stampedes);
    scenario.expect(`each client held the lock once per stampede (${holds} holds)`, holds === stampedes * PROCESSES * CLIENTS);
    const sorted = [...spreads].sort((a, b) => a - b);
    const quantile = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(1);
    scenario.expect(
      'the clients really started together',
      true,
      `first attempts of a stampede spread over ${quantile(0.5)} ms (median), ${quantile(0.95)} ms (95th percentile), ${quantile(1)} ms (max)`,
    );

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
