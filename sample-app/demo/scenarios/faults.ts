import type { DemoEnvironment } from '../environment.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { allCanLock, lockingDown, type Readiness } from '../health.js';
import { call } from '../http.js';
import type { DemoOptions } from '../options.js';
import { describeStatuses, say, table, type Verdict } from '../report.js';
import { ms, percentile } from '../stats.js';
import { problems, withdrawalBurst, type BurstResult } from './withdrawals.js';

const RECOVERY_TIMEOUT_MS = 30_000;

/**
 * Loses lock masters under the running app: with 2 of 5 down a quorum (3) is still there and
 * the protected route must stay exactly right; with 3 down no lock can be had, and the route
 * must answer 503 at once and change nothing; with the masters back (empty, like replaced
 * machines), locking pauses for the restart quarantine (withdrawals sent then wait it out and
 * stay exactly right), then works again.
 */
export async function faultPhase(env: DemoEnvironment, options: DemoOptions, verdict: Verdict): Promise<void> {
  const quorum = Math.floor(env.masters.length / 2) + 1;
  say(`3. Fault tolerance: ${env.masters.length} masters, a lock needs ${quorum}; protected withdrawals only.`);
  const rows: string[][] = [];
  const burst = (prefix: string) => withdrawalBurst(env.replicaUrls, { route: 'withdraw', prefix, ...options.faults });

  await Promise.all([env.masters[0]!.kill(), env.masters[1]!.kill()]);
  const twoDown = await burst('f2');
  rows.push(['killed 2 masters (SIGKILL)', ...describe(twoDown)]);
  expectCorrect(verdict, twoDown, 'with 2 of 5 masters down');

  await env.masters[2]!.kill();
  const threeDown = await burst('f3');
  const transfer = await call('POST', `${env.replicaUrls[0]}/transfers`, { from: 'f3-1', to: 'f3-2', amount: 10 });
  const health = await Promise.all(env.replicaUrls.map((url) => call<Readiness>('GET', `${url}/health`)));
  rows.push(['killed a 3rd master', ...describe(threeDown)]);
  const states = [...new Set(health.map(lockingDown))].join(' / ');
  rows.push(['', `a transfer → ${transfer.status}${transfer.status === 503 ? ' unavailable' : ''}`, `/health on every replica: ${states}`]);
  verdict.expect(
    threeDown.statuses[503] === threeDown.answers.length && transfer.status === 503,
    `with 3 of 5 masters down every locked request must get 503; got ${describeStatuses(threeDown.statuses)}, transfer ${transfer.status}`,
  );
  verdict.expect(threeDown.wrongAccounts === 0, `with 3 of 5 masters down: ${problems(threeDown).join('; ')}`);

  // Back, but empty, like replaced machines: their votes must not count until no lock they may
  // have forgotten can still be live (restart quarantine, on as shipped). Locking pauses meanwhile.
  const restartedAt = performance.now();
  await Promise.all(env.masters.slice(0, 3).map((master) => master.restart()));
  const paused = await untilQuarantined(env.replicaUrls[0]!, RECOVERY_TIMEOUT_MS);
  rows.push(['restarted the 3 (empty)', 'locking pauses; /health says', paused ?? 'never reported the quarantine']);
  verdict.expect(paused !== undefined, 'after the masters restarted empty, /health never reported their restart quarantine');
  // Sent during the pause: the withdrawals wait exactly until the quarantine ends, then go through.
  const during = await burst('f4');
  const recovered = await allCanLock(env.replicaUrls, RECOVERY_TIMEOUT_MS);
  const recoveryMs = performance.now() - restartedAt;
  verdict.expect(recovered, `the replicas could not lock again within ${RECOVERY_TIMEOUT_MS / 1000} s of the masters restarting`);
  rows.push(['', ...describe(during)]);
  rows.push(['', recovered ? `every replica locks again ${(recoveryMs / 1000).toFixed(1)} s after the restart` : 'NOT recovered', '']);
  expectCorrect(verdict, during, 'sent while the restarted masters were in quarantine');
  if (recovered) {
    const back = await burst('f5');
    rows.push(['', ...describe(back)]);
    expectCorrect(verdict, back, 'after the masters came back');
  }
  table(rows, { align: 'lll' });
  say('   (The restart quarantine is on, as shipped: its window is the longest lock ttl the replicas use.)');
  say();
}

/** Polls one replica's readiness until it reports masters in restart quarantine: its message then. */
async function untilQuarantined(url: string, timeoutMs: number): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await call<Readiness>('GET', `${url}/health`);
    // Once every restarted master is back and judged: none unreachable, some in quarantine.
    const message = answer.body.error?.['redlock']?.message ?? '';
    if (answer.status === 503 && /restart quarantine/.test(message) && !/unreachable/.test(message)) return lockingDown(answer);
    await sleep(50);
  }
  return undefined;
}

function describe(result: BurstResult): [string, string] {
  const outcome =
    result.wrongAccounts === 0
      ? result.accepted > 0
        ? `0 double-spends, balances right, lock wait p50 ${ms(percentile(result.lockWaits, 50))} p99 ${ms(percentile(result.lockWaits, 99))}`
        : `no balance changed; all answered within ${ms(result.elapsedMs)}`
      : `WRONG: ${result.doubleSpends} double-spends, ${result.wrongAccounts} accounts wrong`;
  return [`${result.answers.length} withdrawals → ${describeStatuses(result.statuses)}`, outcome];
}

/** Exactly right, and every request answered as a working service would (done, refused, or busy). */
function expectCorrect(verdict: Verdict, result: BurstResult, when: string): void {
  verdict.expect(result.wrongAccounts === 0, `protected withdrawals ${when}: ${problems(result).join('; ')}`);
  const unexpected = Object.keys(result.statuses).filter((status) => !['201', '409', '422'].includes(status));
  verdict.expect(unexpected.length === 0, `protected withdrawals ${when} should all be served; got ${describeStatuses(result.statuses)}`);
}
