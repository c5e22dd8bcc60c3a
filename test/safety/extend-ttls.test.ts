import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import type { HistoryEvent } from './support/history.js';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { expectSharing, KINDS, loopWorker, range, shuffled, tally } from './support/scenario-kit.js';

// Extends with random ttls, most of them shorter than what is left of the lock, while masters
// are slow, paused or killed. An extend is a compare-and-PEXPIRE on every master: whatever the
// round's verdict, a master that applied it drops the key a new ttl later, so a lock that keeps
// its old deadline after a failed shorter extend says "held" while another client takes it.
// The workers use the lock carefully: they stop working once it says it is gone, and write the
// unfenced counter only with a margin of validity left; every extend, ok or failed, records the
// deadline the lock states afterwards, and the checker holds the lock to it.
// One process keeps the default node timeout (10% of the ttl, so a 2 ms extend waits 1 ms and
// slow masters always time out); the others wait for slow masters, and so can take the lock
// while the first one's extends are failing on them.

const LATENCY_MS = 200;
const NODE_TIMEOUT_MS = 600;
/** Long enough that an acquire and its fence round through a slow master leave validity. */
const TTLS = [2_000, 3_000];
/** Below the 2 ms minimum drift (never valid), about it, and up to longer than the lock. */
const EXTEND_TTLS = [1, 2, 3, 5, 10, 50, 150, 400, 1_000, 2_500];
const EPISODE_MS = 1_200;
/** Healthy masters between episodes: slow rounds that split the votes leave little progress. */
const CALM_MS = 700;
const SHORT_MS = 5_000;

type Episode = 'slow' | 'slow+paused' | 'slow+killed';
const EPISODES: readonly Episode[] = ['slow', 'slow+paused', 'slow+killed'];

const fixture = scenarioFixture({ proxied: true });

for (const kind of KINDS) {
  it(`${kind.title}keeps no lock alive past what a failed or shortening extend left of it`, async () => {
    const masters = fixture.masters();
    const proxies = fixture.proxies();
    const scenario = fixture.start({
      id: `extend-ttls${kind.id}`,
      title: `${kind.title}Extends with random ttls, shorter and longer than what is left, on slow and failing masters`,
      expected: 'safe',
      method:
        `3 processes x 2 workers take one resource one round at a time (tryAcquire, ttl ${TTLS.join('/')} ms) through TCP proxies ` +
        `and extend it 1-3 times per hold with a ttl from ${EXTEND_TTLS.join('/')} ms; one process has the default node timeout, two ` +
        `${NODE_TIMEOUT_MS} ms. Episodes of ${EPISODE_MS / 1000} s, ${CALM_MS / 1000} s apart: ${LATENCY_MS} ms latency (each way) on 2 of 5 masters, ` +
        'in turn alone, with a 3rd paused (SIGSTOP), and with a 3rd killed and restarted empty (quarantine on, default fences).',
    });
    const urls = proxies.map((proxy) => proxy.url);
    await Promise.all(
      range(3).map((p) =>
        scenario.spawn(
          loopWorker(`w${p}`, urls, {
            shared: kind.shared,
            resources: ['shrunk'],
            ttlMs: TTLS,
            single: true,
            extendTtls: EXTEND_TTLS,
            holdMs: 30,
            engine: p === 0 ? {} : { nodeTimeoutMs: NODE_TIMEOUT_MS },
          }),
        ),
      ),
    );
    // The fresh masters are in restart quarantine for the longest ttl: faults start once they vote.
    scenario.expect('the workers hold the lock before the faults', await scenario.until(() => scenario.holdsSince(scenario.startedAt) > 0, 10_000));

    const endAt = performance.now() + runFor(SHORT_MS);
    let turn = 0;
    do {
      await sleep(CALM_MS); // healthy masters: the extends' own short ttls are the only fault
      const kind = EPISODES[turn++ % EPISODES.length]!;
      const [slowA, slowB, third] = shuffled(range(5));
      for (const i of [slowA!, slowB!]) {
        proxies[i]!.setLatency(LATENCY_MS);
        scenario.fault(`${LATENCY_MS} ms latency on master ${i}`);
      }
      if (kind === 'slow+paused') {
        masters.pause(third!);
        scenario.fault(`pause master ${third}`);
      } else if (kind === 'slow+killed') {
        await masters.kill(third!);
        scenario.fault(`kill master ${third}`);
      }
      await sleep(EPISODE_MS); // the fault itself: how long the masters stay slow or down
      if (kind === 'slow+paused') masters.resume(third!);
      if (kind === 'slow+killed') {
        await masters.start(third!);
        scenario.fault(`restart master ${third} empty`);
      }
      for (const i of [slowA!, slowB!]) proxies[i]!.setLatency(0);
    } while (performance.now() < endAt);

    await scenario.stopWorkers(); // every operation has ended: the history is complete
    const events = scenario.history.events();
    const extensions = shortening(events);
    const failed = extensions.filter((e) => e.end.phase === 'fail');
    scenario.expect(
      `extends shorter than what was left both succeeded and failed (${extensions.length - failed.length} ok, ${failed.length} failed)`,
      failed.length > 0 && failed.length < extensions.length,
      `failed: ${tally(failed.map((e) => reason(e.end)))}`,
    );
    const onFaults = failed.filter((e) => reason(e.end) === 'masters slow or down');
    scenario.expect(`some of them failed because masters were slow or down (${onFaults.length})`, onFaults.length > 0);

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}

interface Extension {
  readonly ttl: number;
  readonly end: HistoryEvent;
}

/** Extends whose ttl was shorter than what their lock had left when they were called. */
function shortening(events: readonly HistoryEvent[]): Extension[] {
  const stated = new Map<string, bigint>(); // token -> the deadline stated last
  const invoked = new Map<string, { ttl: number; left: bigint }>();
  const found: Extension[] = [];
  for (const event of events) {
    if (!event.token) continue;
    if ((event.op === 'acquire' || event.op === 'extend') && event.phase !== 'invoke' && event.validUntil !== undefined) {
      stated.set(event.token, event.validUntil);
    }
    if (event.op !== 'extend' || !event.id) continue;
    if (event.phase === 'invoke') {
      const until = stated.get(event.token);
      if (until !== undefined && event.ttl !== undefined) invoked.set(event.id, { ttl: event.ttl, left: until - event.t });
    } else {
      const call = invoked.get(event.id);
      if (call && BigInt(call.ttl) * 1_000_000n < call.left) found.push({ ttl: call.ttl, end: event });
    }
  }
  return found;
}

function reason(end: HistoryEvent): string {
  if (end.code === 'QUORUM_UNREACHABLE') return end.error?.includes('validity') ? 'no validity left' : 'masters slow or down';
  return end.code ?? '?';
}
