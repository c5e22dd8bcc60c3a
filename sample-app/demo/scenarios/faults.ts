import type { DemoEnvironment } from '../environment.js';
import { allCanLock } from '../health.js';
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
 * machines), it must work again.
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
  const health = await Promise.all(env.replicaUrls.map((url) => call<{ status?: string }>('GET', `${url}/health`)));
  rows.push(['killed a 3rd master', ...describe(threeDown)]);
  const states = [...new Set(health.map((answer) => answer.body.status))].join(' / ');
  rows.push(['', `a transfer → ${transfer.status}${transfer.status === 503 ? ' unavailable' : ''}`, `/health on every replica: ${states}`]);
  verdict.expect(
    threeDown.statuses[503] === threeDown.answers.length && transfer.status === 503,
    `with 3 of 5 masters down every locked request must get 503; got ${describeStatuses(threeDown.statuses)}, transfer ${transfer.status}`,
  );
  verdict.expect(threeDown.wrongAccounts === 0, `with 3 of 5 masters down: ${problems(threeDown).join('; ')}`);

  const restartedAt = performance.now();
  await Promise.all(env.masters.slice(0, 3).map((master) => master.restart()));
  const recovered = await allCanLock(env.replicaUrls, RECOVERY_TIMEOUT_MS);
  const recoveryMs = performance.now() - restartedAt;
  verdict.expect(recovered, `the replicas could not lock again within ${RECOVERY_TIMEOUT_MS / 1000} s of the masters restarting`);
  rows.push(['restarted the 3 (empty)', recovered ? `every replica locks again ${(recoveryMs / 1000).toFixed(1)} s later` : 'NOT recovered', '']);
  if (recovered) {
    const back = await burst('f4');
    rows.push(['', ...describe(back)]);
    expectCorrect(verdict, back, 'after the masters came back');
  }
  table(rows, { align: 'lll' });
  say('   (The restart quarantine is off for the demo\'s own fresh masters, see environment.ts; with REDIS_URLS it stays on.)');
  say();
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
