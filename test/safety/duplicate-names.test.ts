import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { failures, runFor, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { expectSharing, KINDS, loopWorker, range } from './support/scenario-kit.js';

// One server listed under two names: directly and through a TCP proxy, which an address check
// cannot tell apart (nor localhost from 127.0.0.1, nor a DNS alias). Three servers A, B, C; each
// process lists three names in which a different server appears twice:
//   w0: A, A via proxy, B    w1: B, B via proxy, C    w2: C, C via proxy, A
// Counted by name, a process holds a quorum of 2 from its doubled server alone (the acquire
// script grants again a key that already holds our token), so w0 holding A while w1 holds B is
// two holders. Counted by server, each process needs both of its servers, and any two processes
// share one: mutual exclusion holds. Fenced acquires and the fair queue take the scripted path.
// The proxies reset their connections now and then: every reconnection asks the server who it
// is again, and the name that lost the vote must not win it back. One process runs with restart
// quarantine off, which must not turn the identity check off with it.

const TTL = 1_000;
const SHORT_MS = 5_000;
const RESET_EVERY_MS = 400;
/** How a warning about the doubled server may read; the engine's wording is not fixed. */
const DUPLICATE_WARNING = /same server|duplicate|listed twice/i;

const fixture = scenarioFixture({ proxied: true, masters: 3 });

for (const kind of KINDS) {
  it(`${kind.title}counts a server listed under two names as one voter`, async () => {
    const servers = fixture.masters().urls();
    const proxies = fixture.proxies();
    const scenario = fixture.start({
      id: `duplicate-names${kind.id}`,
      title: `${kind.title}One server listed under two names (directly and through a TCP proxy)`,
      expected: 'safe',
      method:
        '3 servers A, B, C; 3 processes x 2 workers loop on one resource (ttl 1 s, fenced, waiting in the fair queue), each ' +
        'configured with 3 names of which a different server takes two: [A, A via proxy, B], [B, B via proxy, C], [C, C via proxy, A]; ' +
        `every ${RESET_EVERY_MS} ms a proxy resets its connections; the third process has restart quarantine off (bare counter fences).`,
    });
    await Promise.all(
      range(3).map((p) =>
        scenario.spawn(
          loopWorker(`w${p}`, [servers[p]!, proxies[p]!.url, servers[(p + 1) % 3]!], {
            resources: ['doubled'],
            shared: kind.shared,
            ttlMs: [TTL],
            holdMs: 5,
            // No master loses data here: bare counter fences, so the fence checks test them.
            engine: p === 2 ? { fenceTimeFloor: false, restartQuarantineMs: false } : { fenceTimeFloor: false },
          }),
        ),
      ),
    );

    // The fault is in the configuration; the resets only make the engines identify the servers again.
    const endAt = performance.now() + runFor(SHORT_MS);
    do {
      await sleep(RESET_EVERY_MS);
      const p = Math.floor(Math.random() * proxies.length);
      proxies[p]!.resetConnections();
      scenario.fault(`reset the connections through the proxy of server ${p}`);
    } while (performance.now() < endAt);
    await scenario.stopWorkers();

    const events = scenario.history.events();
    for (const p of range(3)) {
      const proc = `w${p}`;
      const holds = scenario.holdsSince(scenario.startedAt, proc);
      // Not locked out by counting servers: it needs both of its servers, and so does each of the
      // others. How often is no measure here: the resets land on connections that count (a
      // process may vote through its proxy, if that name identified first), costing waiters their
      // wake-ups and rounds, so with 70% readers a process has waited 3-4 s (ttl 1 s) while
      // another's readers kept both its servers (under a full suite's load, 2 holds in 5 s).
      // Should it not hold, what its acquires ended in says why.
      const ends = events.filter((e) => e.proc === proc && e.op === 'acquire' && e.phase !== 'invoke');
      const byEnd = new Map<string, number>();
      for (const e of ends) {
        const end = `${e.phase}${e.code ? ` ${e.code}` : ''}`;
        byEnd.set(end, (byEnd.get(end) ?? 0) + 1);
      }
      scenario.expect(`${proc} took the lock (${holds} times)`, holds >= 1, [...byEnd].map(([end, count]) => `${end}: ${count}`).join(', '));
      const warnings = events.filter((e) => e.proc === proc && e.op === 'warning' && DUPLICATE_WARNING.test(e.note ?? ''));
      scenario.expect(
        `${proc}'s engine warned that one server is listed twice`,
        warnings.length > 0,
        warnings[0]?.note ?? `no such warning; all: ${events.filter((e) => e.proc === proc && e.op === 'warning').map((e) => e.note).join(' | ') || 'none'}`,
      );
    }

    expectSharing(scenario, kind);
    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
