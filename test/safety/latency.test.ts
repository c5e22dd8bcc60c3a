import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { checkHistory } from './support/checker.js';
import { attempts, durationMs, KINDS, loopWorker, range, sharedAtOnce, shuffled, tally, WEIGHTED } from './support/scenario-kit.js';

// 200 ms of latency (each way) on 2 of 5 masters. Workers take the lock one round at a time
// (tryAcquire), with a node timeout long enough that a slow master is waited for whenever the
// fast ones do not make a quorum alone. Every lock handed out must have positive validity that
// accounts for the delay (validity <= ttl - drift - elapsed, on the shared clock), or the
// acquire must fail. The checker verifies both for every single-round acquisition.
// For most of each episode one fast master also carries a stale key of a "crashed client", as a
// client that died halfway through an acquire leaves behind: the fast masters alone then cannot
// make a quorum, and every grant needs a slow master's vote.

const LATENCY_MS = 200;
const NODE_TIMEOUT_MS = 1_000;
/** From "barely longer than a slow round" to "comfortable". */
const TTLS = [800, 1_500, 2_500, 4_000];
const EPISODE_MS = 2_500;
/** How long in each episode a fast master carries the stale key. */
const STALE_MS = 1_800;
const SHORT_MS = 5_000;

const fixture = scenarioFixture({ proxied: true });

for (const kind of [...KINDS, WEIGHTED]) {
  it(`${kind.title}hands out only locks whose validity accounts for a 200 ms delay on 2 of 5 masters`, async () => {
    const proxies = fixture.proxies();
    const direct = fixture.direct();
    const scenario = fixture.start({
      id: `latency${kind.id}`,
      title: `${kind.title}${LATENCY_MS} ms latency (each way) on 2 of 5 masters`,
      expected: 'safe',
      method:
        `3 processes x 2 clients (3 on one resource, 3 on one each) take the lock one round at a time (tryAcquire), ttl one of ${TTLS.join('/')} ms, node ` +
        `timeout ${NODE_TIMEOUT_MS} ms, through TCP proxies; every ${EPISODE_MS / 1000} s another 2 masters get the latency, and for ${STALE_MS / 1000} s of ` +
        'that time one fast master holds a stale key of a crashed client (bare counter fences).',
    });
    const urls = proxies.map((proxy) => proxy.url);
    await Promise.all(
      range(3).map((p) =>
        scenario.spawn(
          loopWorker(`w${p}`, urls, {
            shared: kind.shared,
            workers: 2,
            // Worker 0 contends for the shared resource; worker 1 has one of its own, so its rounds
            // meet nothing but the latency and the stale key.
            resources: ['slow', `solo-w${p}`],
            ttlMs: TTLS,
            single: true,
            separateEngines: true,
            engine: { restartQuarantineMs: false, nodeTimeoutMs: NODE_TIMEOUT_MS, fenceTimeFloor: false },
          }),
        ),
      ),
    );

    const endAt = performance.now() + runFor(SHORT_MS);
    do {
      const slow = shuffled(range(5)).slice(0, 2);
      for (const i of slow) {
        proxies[i]!.setLatency(LATENCY_MS);
        scenario.fault(`${LATENCY_MS} ms latency on master ${i}`);
      }
      const fast = range(5).filter((i) => !slow.includes(i));
      const stale = fast[Math.floor(Math.random() * fast.length)]!;
      for (const resource of ['slow', 'solo-w0', 'solo-w1', 'solo-w2']) {
        await direct[stale]!.set(`redlock:${resource}`, 'crashed-client', 'PX', STALE_MS);
      }
      scenario.fault(`stale key of a crashed client on fast master ${stale} for ${STALE_MS / 1000} s`);
      await sleep(EPISODE_MS);
      for (const i of slow) proxies[i]!.setLatency(0);
    } while (performance.now() < endAt);

    await scenario.stopWorkers();
    const all = attempts(scenario.history.events());
    const granted = all.filter((a) => a.end?.phase === 'ok');
    // A round that needed a slow master took at least one slow round trip.
    const slowGrants = granted.filter((a) => durationMs(a)! >= 2 * LATENCY_MS);
    scenario.expect(
      `some locks were granted only with a slow master's vote (${slowGrants.length} of ${granted.length})`,
      slowGrants.length > 0,
    );
    const failed = all.filter((a) => a.end?.phase === 'fail').map((a) => (a.end!.error?.includes('validity') ? 'too slow for its ttl' : a.end!.code ?? '?'));
    scenario.expect('acquires that failed say why', true, tally(failed));

    // Not a condition here: 3 workers trying one round at a time seldom hold one resource together
    // (none did in a double-load CI run); what this scenario tests is validity, for every kind.
    const { what, most } = sharedAtOnce(kind, checkHistory(scenario.history.events()).holds);
    if (kind.shared) scenario.expect(`${what} held together: at most ${most} at once on one resource`, true);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
