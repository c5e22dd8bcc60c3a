#!/usr/bin/env node
// The long safety run: `npm run test:safety -- --minutes N` runs every scenario of test/safety for
// N minutes, one scenario at a time, and writes docs/SAFETY.md from what they report.
//
//   --minutes N     minutes per scenario (default 2)
//   --only NAME     run only test/safety/NAME* (the report then goes to stdout, not docs/SAFETY.md);
//                   several names may be given, comma-separated
//   --kinds shared  run only the semaphore and read-write cases of the scenarios that run every kind
//   --kinds lock    run only the plain lock's cases (no semaphore or read-write case)
//   --out FILE      where to write the report (default docs/SAFETY.md)
//   --client NAME   the engines' client library: ioredis (default), node-redis or node-redis-4
//                   (Sentinel and Cluster voters stay ioredis: node-redis's cannot vote)
//
// Plain JavaScript on purpose: it only starts vitest (which compiles the TypeScript) with
// SAFETY_MINUTES and SAFETY_RESULTS_DIR set, then turns the per-scenario JSON into markdown.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem, type } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Report order; a scenario not listed here is appended. */
const ORDER = [
  'kill-masters',
  'restart-quarantine',
  'restart-control',
  'paused-master',
  'latency',
  'paused-holder',
  'dropped-replies',
  'script-flush-restart',
  'thundering-herd',
  'extend-ttls',
  'duplicate-names',
  'paused-master-semaphore',
  'paused-master-read-write',
  'latency-semaphore',
  'latency-read-write',
  'paused-holder-semaphore',
  'paused-holder-read-write',
  'dropped-replies-semaphore',
  'dropped-replies-read-write',
  'script-flush-restart-semaphore',
  'script-flush-restart-read-write',
  'thundering-herd-semaphore',
  'thundering-herd-read-write',
  'extend-ttls-semaphore',
  'extend-ttls-read-write',
  'duplicate-names-semaphore',
  'duplicate-names-read-write',
  'sentinel-failover',
  'sentinel-control',
  'cluster-failover',
  'cluster-control',
  'sentinel-failover-semaphore',
  'sentinel-control-semaphore',
  'sentinel-failover-read-write',
  'sentinel-control-read-write',
  'cluster-failover-semaphore',
  'cluster-control-semaphore',
  'cluster-failover-read-write',
  'cluster-control-read-write',
  'mixed-fleet',
  'mixed-fleet-control',
];

/** The client libraries the engines may use (SAFETY_CLIENT for the workers), and the package each is read from. */
const CLIENT_VERSIONS = { ioredis: 'ioredis', 'node-redis': 'redis', 'node-redis-4': 'redis4' };

function clientVersion(client) {
  const pkg = CLIENT_VERSIONS[client];
  const version = JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  return `${client === 'ioredis' ? 'ioredis' : 'node-redis'} ${version}`;
}

/** Ids of the semaphore and read-write cases of the scenarios that run every kind. */
const SHARED_ID = /-(semaphore|read-write)$/;

const KIND_TEXT = {
  overlap: 'overlap',
  'lost-update': 'lost update',
  'lost-update-fenced': 'lost fenced update',
  'fence-order': 'fence order',
  'stale-accepted': 'stale write accepted',
  'no-validity': 'no validity',
  'validity-excess': 'validity excess',
  'over-limit': 'over limit',
  'writer-shared': 'writer shared',
};

function parseArgs(argv) {
  const args = { minutes: 2, only: undefined, out: undefined, kinds: undefined, client: 'ioredis' };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split('=', 2);
    const value = () => inline ?? argv[++i];
    if (name === '--minutes') args.minutes = Number(value());
    else if (name === '--only') args.only = value();
    else if (name === '--kinds') args.kinds = value();
    else if (name === '--out') args.out = value();
    else if (name === '--client') args.client = value();
    else if (name === '--help' || name === '-h') usage(0);
    else usage(1, `unknown argument ${argv[i]}`);
  }
  if (!(args.minutes > 0)) usage(1, '--minutes must be a positive number');
  if (args.kinds !== undefined && args.kinds !== 'shared' && args.kinds !== 'lock') usage(1, '--kinds takes: shared, lock');
  if (!Object.hasOwn(CLIENT_VERSIONS, args.client)) usage(1, `--client takes: ${Object.keys(CLIENT_VERSIONS).join(', ')}`);
  return args;
}

function usage(code, problem) {
  if (problem) console.error(problem);
  console.error('usage: npm run test:safety -- [--minutes N] [--only NAME[,NAME...]] [--kinds shared|lock] [--client ioredis|node-redis|node-redis-4] [--out FILE]');
  process.exit(code);
}

function tryRun(command, args) {
  try {
    return execFileSync(command, args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

function machine() {
  const cpu = cpus();
  const redisBin = process.env.REDIS_SERVER_BIN || 'redis-server';
  const redis = tryRun(redisBin, ['--version'])?.match(/v=(\S+)/)?.[1] ?? 'unknown';
  const commit = tryRun('git', ['rev-parse', '--short', 'HEAD']);
  // The code under test is lib/ and the suite itself; notes, docs and untracked files are not.
  const dirty = tryRun('git', ['status', '--porcelain', '--untracked-files=no', '--', 'lib', 'test']);
  return {
    os: `${type()} ${release()}`,
    cpu: `${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores`,
    memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    redis,
    commit: commit ? `${commit}${dirty ? ' with uncommitted changes to lib/ or test/' : ''}` : 'not a git checkout',
  };
}

function readResults(dir) {
  const results = readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .map((file) => JSON.parse(readFileSync(join(dir, file), 'utf8')));
  const rank = (id) => (ORDER.includes(id) ? ORDER.indexOf(id) : ORDER.length);
  return results.sort((a, b) => rank(a.id) - rank(b.id) || a.id.localeCompare(b.id));
}

const cell = (text) => String(text).replaceAll('|', '\\|').replaceAll('\n', ' ');

function violationsText(result) {
  const kinds = Object.entries(result.counts)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${KIND_TEXT[kind] ?? kind} ${n}`);
  return kinds.length ? `${result.violations} (${kinds.join(', ')})` : String(result.violations);
}

function report({ results, minutes, started, finished, info, command, exitCode, only, kinds, client }) {
  // With --only, the scenarios of other files were not asked for: only those of that file can be missing.
  const prefixes = only ? only.split(',') : [''];
  const expected = ORDER.filter((id) => prefixes.some((prefix) => id.startsWith(prefix)) && (!kinds || SHARED_ID.test(id) === (kinds === 'shared')));
  const missing = expected.filter((id) => !results.some((r) => r.id === id));
  const allGood = results.every((r) => r.asExpected) && missing.length === 0 && exitCode === 0;
  const lines = [];
  lines.push('# Safety test results', '');
  lines.push(
    `A real run of the safety suite (\`test/safety/\`), ${minutes} minute${minutes === 1 ? '' : 's'} per scenario, ` +
      `started ${started.toISOString().replace('T', ' ').slice(0, 16)} UTC and finished ` +
      `${finished.toISOString().replace('T', ' ').slice(0, 16)} UTC, with \`${command}\`.`,
    '',
    `- Machine: ${info.os}, ${info.cpu}, ${info.memory} of memory`,
    `- Node ${info.node}, redis-server ${info.redis}, the engines' clients: ${clientVersion(client)}` +
      (client === 'ioredis' ? '' : ' (Sentinel and Cluster voters: ioredis)'),
    `- Code: commit ${info.commit}`,
    `- Verdict: ${allGood ? 'every scenario came out as expected' : '**NOT every scenario came out as expected** (see below)'}`,
    '',
  );
  lines.push(
    '| scenario | ran | lock cycles | of which by hand-off | detached re-entries | forged grants / wake-ups | faults injected | violations found | expected | result |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const r of results) {
    lines.push(
      `| ${cell(r.title)} | ${(r.durationMs / 60_000).toFixed(1)} min | ${r.holds} | ${r.handedOff ?? '-'} | ${r.detachedReentries ?? '-'} | ` +
        `${r.forged ? `${r.forged.grants} / ${r.forged.wakes}` : '-'} | ${r.faults} | ${cell(violationsText(r))} | ` +
        `${r.expected === 'safe' ? '0' : '> 0 (control)'} | ${r.asExpected ? 'as expected' : '**not as expected**'} |`,
    );
  }
  for (const id of missing) lines.push(`| ${id} | - | - | - | - | - | - | - | - | **no result: the test failed before it finished** |`);
  lines.push(
    '',
    '*Lock cycles*: successful acquisitions, each followed by a read-modify-write of the protected store and a ' +
      'release. *By hand-off*: those a release granted (server-side hand-off), with no round of the holder\'s own. ' +
      '*Detached re-entries*: acquires by tasks a `using` call started and that asked for the same lock after the call had released it (they must take it anew). ' +
      '*Forged*: hand-off grants and wake-ups a client that can read the queues and PUBLISH sent for live queue entries (none may make a holder). *Faults injected*: the kills, restarts, pauses, lost replies... counted one per master and event. ' +
      '*Violations*: what the history checker found (below); 0 is expected everywhere except the control, whose ' +
      'violations prove the checker sees the fault the restart quarantine prevents.',
    '',
  );

  lines.push('## Found by this suite', '');
  lines.push(
    '- **Fixed (two holders, found by a hostile review; the suite now sees it):** a waiter counted a published ' +
      'message as a master\'s hand-off grant, and took its validity from the message: anyone who can read the queues ' +
      'and PUBLISH could make it hold a lock another client held. A grant now needs the master\'s own answer to the ' +
      'waiter\'s question, and validity comes from the waiter\'s clock. The forger (test/safety/support/wake-forger.ts) ' +
      'made thundering-herd find 69 violations in one short run on the engine before the fix; regression test ' +
      '`test/core/forged-wakeups.test.ts`.',
    '- **Fixed (work under a released lock, found by a hostile review; the suite now sees it):** a task started inside ' +
      '`using` that asked for the same lock after the call returned was treated as reentrant and ran without the lock. ' +
      'The detached re-entries (reentryCycle in test/safety/support/worker.ts) found 50 holds with no validity in one ' +
      'short run of kill-masters on the engine before the fix; regression tests in `test/core/reentrancy.test.ts`.',
    '- **Fixed (safety of the validity rule):** the latency scenario caught the engine handing out locks whose ' +
      'validity was already used up. Validity counts from before the first request, and the engine accepted a ' +
      'round when `ttl - elapsed - drift > 0`; a round slower than about half the ttl therefore returned a lock ' +
      'that had expired on arrival (`remainingMs()` 0, signal firing at once), and an extension could likewise ' +
      '"succeed" into the past. A lock or an extension now needs `validity > elapsed` (`validityLeftMs` in ' +
      '`lib/core/base/clock.ts`); regression test in `test/core/validity-left.test.ts`.',
    '- **Fixed (liveness, not safety):** when two contenders split the votes, the winner\'s entry in the ' +
      'masters\' waiter queue used to stay, on the masters that refused it, until it died (up to the blocking ' +
      'key\'s ttl plus one second); had the holder crashed, the next holder would have come about a second after ' +
      'the lock expired. A winner now withdraws its entries from every master that did not grant it ' +
      '(`QueueEntries.withdrawWhereRefused`; test in `test/core/hand-over.test.ts`). The paused-holder scenario ' +
      'reports the idle time after a stalled holder.',
    '- **Fixed (two holders, found by a hostile probe; the suite now sees it):** an extension that failed kept ' +
      'the lock\'s old deadline, although a master that got the request may have applied its shorter ttl: after ' +
      '`extend(2)` failed, `assertValid()` passed while another client acquired. A lock now relies, from the ' +
      'moment an extension is sent, only on the earlier of the old deadline and the one the new ttl gives, and ' +
      'is lost (signal fired) when that has passed. The extend-ttls scenario (random extend ttls on slow, paused ' +
      'and restarted masters) found 24 to 110 violations per short run on the engine before the fix (overlaps and ' +
      'deadlines claimed past ttl); regression tests in `test/core/extend-failure.test.ts`.',
    '- **Fixed (two holders, found by a hostile probe; the suite now sees it):** masters were told apart by ' +
      'address only, so one server under two names (a proxy, `localhost` beside `127.0.0.1`) voted twice and a ' +
      '"quorum" could come from one server. Masters are now identified by `run_id`, and a duplicate\'s votes never ' +
      'count. The duplicate-names scenario found 265 to 491 violations per short run on the engine before the fix; ' +
      'regression tests in `test/core/duplicate-masters.test.ts`.',
    '',
  );
  lines.push('## What is checked', '');
  lines.push(
    'Worker processes take the lock in a loop and, inside it, read-modify-write a store that lives in the test ' +
      'process and checks fencing tokens. Every operation is recorded as invoke / ok / fail with ' +
      '`process.hrtime.bigint()` (CLOCK_MONOTONIC, one clock for all processes on the machine). The checker ' +
      '(`test/safety/support/checker.ts`, itself tested on hand-written histories) then verifies:',
    '',
    '1. **No overlap**: no two holders\' validity windows on a resource intersect. A window runs from the moment ' +
      'acquire returned to the lock\'s validity deadline as the lock last stated it (after the acquire, and after ' +
      'every extension, successful or failed, longer or shorter), or to the release call if earlier.',
    '2. **No lost update**: a counter that only the lock protects never skips (each write stores the value it ' +
      'read plus one, and the final value is the number of writes); the same for the fenced counter.',
    '3. **Fencing**: successive holders get strictly increasing fencing tokens, and the store never accepts an ' +
      'operation whose token is lower than one it has seen: a stale holder\'s write is rejected.',
    '4. **Validity**: no lock is handed out with its validity already used up, a single-round acquire never ' +
      'promises more than `ttl - drift - elapsed`, and after an extension, successful or failed, the lock never ' +
      'claims more than the new `ttl - drift` from the moment the call returned.',
    '',
  );

  lines.push('## Scenarios', '');
  for (const r of results) {
    lines.push(`### ${r.title}`, '', r.method, '');
    for (const e of r.expectations) {
      lines.push(`- ${e.ok ? '✔' : '✘ **failed:**'} ${e.what}${e.detail ? `: ${e.detail.split('\n')[0]}` : ''}`);
    }
    if (r.examples.length > 0) {
      lines.push('', 'First violations found:', '');
      for (const example of r.examples) lines.push(`- ${example}`);
    }
    if (r.historyFile) lines.push('', `History of this run: \`${r.historyFile}\``);
    lines.push('');
  }

  lines.push('## What this does not show', '');
  lines.push(
    '- All processes ran on one machine over loopback: real networks add partitions, asymmetric delays and ' +
      'packet loss that a TCP proxy only approximates.',
    '- All clocks were one clock. Redlock assumes clocks that advance at about the same rate (the drift ' +
      'factor); a master whose clock jumps forward expires keys early, which no client-side check can see.',
    '- No run can prove the absence of a bug; these runs only failed to find one under these faults.',
    '',
    '## Reproduce',
    '',
    '```bash',
    'npm ci && npm run build',
    `npm run test:safety -- --minutes ${minutes}   # writes docs/SAFETY.md`,
    'npx vitest run test/safety                  # the short version, part of npm test',
    '```',
    '',
  );
  return lines.join('\n');
}

const args = parseArgs(process.argv.slice(2));
const resultsDir = mkdtempSync(join(tmpdir(), 'redlock-safety-results-'));
const vitest = join(ROOT, 'node_modules', '.bin', 'vitest');
if (!existsSync(vitest)) usage(1, 'vitest is not installed: run npm ci first');
const filters = args.only ? args.only.split(',').map((name) => `test/safety/${name}`) : ['test/safety'];
// The shared kinds' cases are named after the kind (KINDS in test/safety/support/scenario-kit.ts);
// not anchored, since a case inside a describe block is matched under the block's name.
const SHARED_TITLE = '(Semaphore \\(limit 2\\)|Read-write lock \\(70% readers\\)): ';
const kindFilter = args.kinds === 'shared' ? ['-t', SHARED_TITLE] : args.kinds === 'lock' ? ['-t', `^(?!.*${SHARED_TITLE})`] : [];
const command =
  `npm run test:safety -- --minutes ${args.minutes}${args.only ? ` --only ${args.only}` : ''}${args.kinds ? ` --kinds ${args.kinds}` : ''}` +
  `${args.client === 'ioredis' ? '' : ` --client ${args.client}`}`;

console.log(`Safety suite, ${args.minutes} min per scenario, one scenario at a time (results in ${resultsDir})`);
const started = new Date();
const run = spawnSync(vitest, ['run', ...filters, ...kindFilter, '--no-file-parallelism'], {
  cwd: ROOT,
  stdio: 'inherit',
  env: { ...process.env, SAFETY_MINUTES: String(args.minutes), SAFETY_RESULTS_DIR: resultsDir, SAFETY_CLIENT: args.client },
});
const finished = new Date();
const exitCode = run.status ?? 1;

const results = readResults(resultsDir);
const markdown = report({ results, minutes: args.minutes, started, finished, info: machine(), command, exitCode, only: args.only, kinds: args.kinds, client: args.client });
const out = args.out ?? (args.only ? undefined : join(ROOT, 'docs', 'SAFETY.md'));
if (out) {
  writeFileSync(out, markdown);
  console.log(`\nwrote ${relative(ROOT, out)}`);
} else {
  console.log(`\n${markdown}`);
}
rmSync(resultsDir, { recursive: true, force: true });
process.exit(exitCode);
