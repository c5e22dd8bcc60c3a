import { killAllSync } from './children.js';
import { DemoEnvironment } from './environment.js';
import { allCanLock } from './health.js';
import { parseOptions, USAGE, type DemoOptions } from './options.js';
import { describeStatuses, say, table, Verdict } from './report.js';
import { faultPhase } from './scenarios/faults.js';
import { history, summarize, waitForRuns } from './scenarios/reconcile.js';
import { transferBurst } from './scenarios/transfers.js';
import { problems, withdrawalBurst, type BurstResult } from './scenarios/withdrawals.js';
import { ms, percentile } from './stats.js';

/**
 * npm run demo: several replicas of the sample app on several Redis masters, concurrent
 * traffic, and a report of what the locks change. Exits 0 only if every protected path gave
 * exactly the right result (and every phase behaved as the report says it should).
 */
const parsed = (() => {
  try {
    return parseOptions(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
})();
if (parsed === 'help') {
  say(USAGE);
  process.exit(0);
}
const options: DemoOptions = parsed;
const env = new DemoEnvironment(options);
const verdict = new Verdict();
let interrupted = false;

// Ctrl-C or a kill: stop everything we started, then leave with the conventional code. A second
// signal while that runs (an impatient Ctrl-C) kills what is left at once.
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  process.on(signal, () => {
    if (interrupted) {
      killAllSync();
      process.exit(code);
    }
    interrupted = true;
    say(`\n${signal}: stopping every process the demo started...`);
    void env.stopAll().finally(() => process.exit(code));
  });
}

try {
  say(`nestjs-redlock demo${options.short ? ' (short run)' : ''}: starting servers and replicas...`);
  await env.start();
  describeSetup();
  if (!(await allCanLock(env.replicaUrls, 0))) {
    // Masters that started recently are in restart quarantine (the replicas log until when): wait it out.
    const waitingSince = performance.now();
    say('Waiting until the replicas can take locks (fresh masters are in restart quarantine)...');
    if (!(await allCanLock(env.replicaUrls, 60_000))) throw new Error('no replica could take a lock within 60 s');
    say(`Locking available after ${((performance.now() - waitingSince) / 1000).toFixed(1)} s.\n`);
  }
  const unlocked = await withdrawals();
  await transfersPhase();
  if (env.ownsMasters) await faultPhase(env, options, verdict);
  else say('3. Fault tolerance: skipped (the masters in REDIS_URLS are not the demo\'s to stop).\n');
  await reconcilePhase(unlocked);
} catch (error) {
  if (!interrupted) verdict.expect(false, `the demo itself failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  if (!interrupted) {
    const count = env.replicas.filter(Boolean).length + env.masters.filter(Boolean).length + (env.store ? 1 : 0);
    const keepLogs = options.keepLogs || !verdict.ok;
    await env.stopAll({ keepLogs });
    if (verdict.ok) {
      say('PASS: the protected paths never gave a wrong result.');
    } else {
      say('FAIL:');
      for (const failure of verdict.failures) say(`  - ${failure}`);
    }
    if (keepLogs) say(`Replica and redis-server logs are in ${env.dir}`);
    say(`Stopped all ${count} processes the demo started.`);
    process.exitCode = verdict.ok ? 0 : 1;
  }
}

function describeSetup(): void {
  const ports = (urls: string[]) => urls.map((url) => url.replace(/^redis:\/\/(.*@)?/, '')).join(', ');
  const quorum = Math.floor(env.masterUrls.length / 2) + 1;
  say();
  table(
    [
      ['lock masters', `${env.masterUrls.length} × redis-server${env.ownsMasters ? ', started by the demo' : ' from REDIS_URLS'} (a lock needs ${quorum}): ${ports(env.masterUrls)}`],
      ['store', `${env.store ? `its own redis-server: ${ports([env.store.url])}` : 'STORE_URL, under a fresh key prefix'} (balances and ledgers, shared by every replica)`],
      ['replicas', `${env.replicas.length} × sample app: ${env.replicas.map((r) => `${r.id} ${r.url}`).join(', ')}`],
    ],
    { indent: '  ', align: 'll' },
  );
  say();
}

/** Returns the unlocked burst: the reconciliation should flag exactly its accounts. */
async function withdrawals(): Promise<BurstResult> {
  const plan = options.withdrawals;
  const allowed = Math.floor(plan.opening / plan.amount);
  say(
    `1. Withdrawals: ${plan.accounts} accounts opened with ${plan.opening}; ${plan.perAccount} withdrawals of ${plan.amount} ` +
      `per account sent at once, spread over the ${env.replicas.length} replicas.`,
  );
  say(`   Each balance allows ${allowed} withdrawals (${allowed * plan.accounts} in all, ${plan.opening * plan.accounts} of money).`);
  const unlocked = await withdrawalBurst(env.replicaUrls, { route: 'withdraw-unlocked', prefix: 'u', ...plan });
  const locked = await withdrawalBurst(env.replicaUrls, { route: 'withdraw', prefix: 'p', ...plan });
  const row = (name: string, r: BurstResult) => [name, r.accepted, r.paidOut, r.left, r.doubleSpends, `${r.inconsistent} of ${plan.accounts}`];
  table([
    ['', 'accepted', 'paid out', 'left in accounts', 'double-spends', 'balance ≠ ledger'],
    row('POST /accounts/:id/withdraw-unlocked (no lock)', unlocked),
    row('POST /accounts/:id/withdraw (@WithLock)', locked),
  ]);
  say(`   Without the lock ${unlocked.paidOut} was paid out of ${plan.opening * plan.accounts}, and ${unlocked.left} is still in the accounts.`);
  say(`   @WithLock answers: ${describeStatuses(locked.statuses)}.`);
  say(
    `   Lock wait on the @WithLock route: p50 ${ms(percentile(locked.lockWaits, 50))}, p99 ${ms(percentile(locked.lockWaits, 99))} ` +
      `(each account's ${plan.perAccount} requests queue for its lock; all ${locked.answers.length} answered in ${(locked.elapsedMs / 1000).toFixed(1)} s).`,
  );
  say();
  verdict.expect(locked.wrongAccounts === 0, `protected withdrawals: ${problems(locked).join('; ')}`);
  const unexpected = Object.keys(locked.statuses).filter((status) => !['201', '409', '422'].includes(status));
  verdict.expect(unexpected.length === 0, `protected withdrawals should all be served; got ${describeStatuses(locked.statuses)}`);
  return unlocked;
}

async function transfersPhase(): Promise<void> {
  const plan = options.transfers;
  say(`2. Transfers (RedlockService, one lock over both accounts): ${plan.count} at once among ${plan.accounts} accounts of ${plan.opening}.`);
  const result = await transferBurst(env.replicaUrls, { prefix: 't', ...plan });
  say(`   ${describeStatuses(result.statuses)}; money before ${result.totalBefore}, after ${result.totalAfter}.`);
  say(
    result.wrong.length === 0
      ? '   Every balance equals its opening plus the accepted transfers, and its ledger.'
      : `   WRONG: ${result.wrong.slice(0, 5).join('; ')}`,
  );
  say();
  verdict.expect(result.wrong.length === 0, `transfers: ${result.wrong.slice(0, 5).join('; ')}`);
  verdict.expect(result.done > 0, 'no transfer went through');
}

async function reconcilePhase(unlocked: BurstResult): Promise<void> {
  const url = env.replicaUrls[0]!;
  const { reconcileEveryMs: everyMs, reconcileWorkMs: workMs } = options.app;
  // Let one more run see the final state of every account.
  await waitForRuns(url, (await history(url)).runs.length, 1, 5 * (everyMs + workMs));
  const summary = summarize(await history(url));
  say(`4. Reconciliation job (@Interval, @WithLock('reconcile', { onLocked: 'skip' }), every ${everyMs} ms on each replica):`);
  const perReplica = Object.entries(summary.perReplica).map(([replica, count]) => `${replica} ${count}`).join(', ');
  say(`   ran ${summary.runs} times (${perReplica}); overlapping runs: ${summary.overlaps}`);
  say(`   skipped ${summary.skipped} times: another replica held the lock (or too few masters could grant it)`);
  const unlockedIds = new Set(unlocked.accounts.filter((a) => !a.view.consistent).map((a) => a.view.id));
  const flaggedProtected = summary.flagged.filter((id) => !unlockedIds.has(id));
  say(
    `   found out of balance: ${summary.flagged.join(', ') || 'none'}` +
      (flaggedProtected.length === 0 && summary.flagged.length > 0 ? ' (only accounts of the unlocked route)' : ''),
  );
  say();
  verdict.expect(summary.runs > 0, 'the reconciliation job never ran');
  verdict.expect(summary.overlaps === 0, `${summary.overlaps} overlapping reconciliation runs`);
  verdict.expect(flaggedProtected.length === 0, `reconciliation found protected accounts out of balance: ${flaggedProtected.join(', ')}`);
}
