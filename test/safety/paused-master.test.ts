import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { now } from './support/history.js';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { attempts, durationMs, expectSharing, KINDS, loopWorker, range, shuffled, tally, WEIGHTED } from './support/scenario-kit.js';

// Pause masters (SIGSTOP) for much longer than the node timeout: 1, then 2, then 3 of 5 at once.
// A paused master accepts connections and buffers requests but answers nothing, the worst kind
// of slow. Acquire must never stall beyond the node timeout: with 1 or 2 paused it succeeds from
// the others; with 3 paused it fails with QuorumUnreachableError, in bounded time, not after the
// pause. Timing is what this scenario is about, so it asserts times, with loose bounds: a hang
// would last the whole pause.

const NODE_TIMEOUT_MS = 100;
// Long enough that half of it (the bound) leaves room for a loaded machine's scheduling.
const PAUSE_MS = 3_000;
/** Half the pause: far above a bounded round (~2 node timeouts), far below a hang. */
const BOUND_MS = PAUSE_MS / 2;
const SHORT_MS = 4_000;

const fixture = scenarioFixture();

for (const kind of [...KINDS, WEIGHTED]) {
  it(`${kind.title}never stalls an acquire beyond the node timeout while masters are paused`, async () => {
    const masters = fixture.masters();
    const scenario = fixture.start({
      id: `paused-master${kind.id}`,
      title: `${kind.title}Pause 1, 2, then 3 of 5 masters (SIGSTOP) well past the node timeout`,
      expected: 'safe',
      method:
        `2 processes x 2 workers loop on one resource (ttl 1 s, node timeout ${NODE_TIMEOUT_MS} ms) while a probe process times ` +
        `tryAcquire on fresh resources. Each episode pauses 1, then 2, then 3 random masters for ${PAUSE_MS / 1000} s each (bare counter fences).`,
    });
    // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
    scenario.forgeWakeups(masters.urls());
    // No master loses data here: fences are the bare counters (no time floor), so the fence checks test them.
    const engine = { restartQuarantineMs: false as const, nodeTimeoutMs: NODE_TIMEOUT_MS, fenceTimeFloor: false };
    await Promise.all([
      ...range(2).map((p) => scenario.spawn(loopWorker(`w${p}`, masters.urls(), { resources: ['paused'], engine, shared: kind.shared }))),
      scenario.spawn(loopWorker('probe', masters.urls(), { mode: 'probe', workers: 1, engine, pauseMs: 20 })),
    ]);

    const phases: { paused: number; from: bigint; until: bigint }[] = [];
    const endAt = performance.now() + runFor(SHORT_MS);
    do {
      for (const count of [1, 2, 3]) {
        const victims = shuffled(range(5)).slice(0, count);
        for (const i of victims) {
          masters.pause(i);
          scenario.fault(`pause master ${i} (${count} paused)`);
        }
        const from = now();
        await sleep(PAUSE_MS); // the fault itself: how long the masters stay frozen
        phases.push({ paused: count, from, until: now() });
        for (const i of victims) masters.resume(i);
        await sleep(200);
      }
    } while (performance.now() < endAt);

    await scenario.stopWorkers(); // every operation has ended: the history is complete
    const events = scenario.history.events();
    const probes = attempts(events, 'probe');
    const releases = attempts(events, 'probe-release');
    const phaseOf = (t: bigint) => phases.find((p) => t >= p.from && t <= p.until);
    const slow = [...probes, ...releases].filter((a) => (durationMs(a) ?? Number.POSITIVE_INFINITY) > BOUND_MS);
    const longest = Math.max(...[...probes, ...releases].map((a) => durationMs(a) ?? 0));
    scenario.expect(
      `every probe acquire and release finished within ${BOUND_MS} ms (longest ${Math.round(longest)} ms, ${probes.length} probes)`,
      slow.length === 0 && probes.length > 0,
      slow.slice(0, 3).map((a) => `${a.invoke.op} took ${durationMs(a) ?? 'forever'} ms`).join('; '),
    );
    for (const count of [1, 2, 3]) {
      // Probes that started and ended inside a phase with `count` masters paused.
      const inPhase = probes.filter((a) => a.end && phaseOf(a.invoke.t)?.paused === count && phaseOf(a.end.t)?.paused === count);
      const outcomes = inPhase.map((a) => (a.end!.phase === 'ok' ? 'ok' : a.end!.code ?? '?'));
      if (count < 3) {
        scenario.expect(`with ${count} paused, probes succeed from the others`, outcomes.includes('ok'), tally(outcomes));
      } else {
        scenario.expect(
          'with 3 paused, probes fail with QuorumUnreachableError',
          outcomes.length > 0 && outcomes.every((o) => o === 'QUORUM_UNREACHABLE'),
          tally(outcomes),
        );
      }
    }

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
