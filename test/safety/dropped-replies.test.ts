import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import type { LoseReplyRequest } from './support/protocol.js';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { expectSharing, KINDS, loopWorker, range } from './support/scenario-kit.js';

// A reply lost after the server applied the command: an acquire, an extend, a release. One
// worker process reaches the masters through proxies of its own; before one operation per cycle
// it has the proxy of a random master lose that operation's reply and reset the connection at
// the same moment (a reply lost on a live stream would desync the client's reply matching; a
// real lost reply ends with a broken connection). ioredis re-sends unanswered commands after it
// reconnects, so each command may run twice: every script must be idempotent for its token.
// Other workers contend directly. At the end no lock key may live longer than its ttl.

const TTL = 1_000;
const SHORT_MS = 5_000;

const fixture = scenarioFixture({ proxied: true });

for (const kind of KINDS) {
  it(`${kind.title}stays safe, and leaves nothing behind past the ttl, when replies are lost after the server applied them`, async () => {
    const proxies = fixture.proxies();
    const direct = fixture.direct();
    const masters = fixture.masters();
    const scenario = fixture.start({
      id: `dropped-replies${kind.id}`,
      title: `${kind.title}Replies lost after the server applied an acquire, an extend, a release`,
      expected: 'safe',
      method:
        'A worker behind TCP proxies loses, in turn, the reply to its acquire, extend or release on a random master ' +
        `(connection reset at once, command re-sent on reconnect); 2 processes x 2 workers contend directly (ttl ${TTL / 1000} s, bare counter fences).`,
    });
    // A client that can read the queues and PUBLISH forges grants and wake-ups throughout.
    scenario.forgeWakeups(masters.urls());
    const lost = { acquire: 0, extend: 0, release: 0 };
    const lostBefore = new Map<number, number>();
    scenario.onLoseReply = (_worker, request: LoseReplyRequest, kind) => {
      const proxy = proxies[request.master]!;
      if (kind === 'lose-reply') {
        lostBefore.set(request.master, proxy.lostReplies);
        proxy.loseNextReply(true);
        return;
      }
      proxy.loseNextReply(false);
      if (proxy.lostReplies > lostBefore.get(request.master)!) {
        lost[request.op]++;
        scenario.fault(`lost the reply to a ${request.op} on master ${request.master}`);
      }
    };
    // No master loses data here: fences are the bare counters (no time floor), so the fence checks test them.
    const engine = { restartQuarantineMs: false as const, fenceTimeFloor: false };
    const shared = { resources: ['lossy'], ttlMs: [TTL], engine, extend: true, shared: kind.shared };
    await Promise.all([
      scenario.spawn(loopWorker('lossy', proxies.map((p) => p.url), { ...shared, workers: 1, lossyReplies: true, pauseMs: 30 })),
      ...range(2).map((p) => scenario.spawn(loopWorker(`w${p}`, masters.urls(), { ...shared, pauseMs: 30 }))),
    ]);

    await sleep(runFor(SHORT_MS)); // the workers inject the faults themselves, one per cycle
    await scenario.stopWorkers();

    scenario.expect(
      `replies were lost for each kind of operation (acquire ${lost.acquire}, extend ${lost.extend}, release ${lost.release})`,
      lost.acquire > 0 && lost.extend > 0 && lost.release > 0,
    );
    scenario.expect(`the lossy worker kept taking the lock (${scenario.holdsSince(scenario.startedAt, 'lossy')} times)`, scenario.holdsSince(scenario.startedAt, 'lossy') >= 3);

    // Every lock key left behind (a re-sent acquire or extend after the release) expires within its ttl.
    const left = await Promise.all(direct.map(async (client) => Promise.all((await client.keys('redlock:*')).map(async (key) => client.pttl(key)))));
    const ttls = left.flat();
    scenario.expect(
      `lock keys still present at the end expire within the ttl (${ttls.length} present)`,
      ttls.every((pttl) => pttl > 0 && pttl <= TTL),
      `pttl: ${ttls.join(', ')}`,
    );
    await sleep(Math.max(0, ...ttls) + 50);
    const stillThere = (await Promise.all(direct.map((client) => client.keys('redlock:*')))).flat();
    scenario.expect('no lock key outlives its ttl', stillThere.length === 0, stillThere.join(', '));

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
