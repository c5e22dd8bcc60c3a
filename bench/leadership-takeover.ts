import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LEADERSHIP_MARKERS, withSection } from './report.js';
import { describeMachine, engineSource } from './support/machine.js';
import { ascending, percentile } from './support/stats.js';
import { LEASE_MS, leadershipScenario, type Fault } from '../test/support/leadership-scenario.js';

/**
 * `node --import ./test/support/ts-loader/register.mjs bench/leadership-takeover.ts [--seconds N] [--smoke]`:
 * how long a standby takes to lead after the leader is SIGKILLed (it dies without a word: the
 * lease must run out) and after it shuts down (it resigns: the standby is woken at once). Three
 * replica processes of test/nest/support/leader-app.ts (a Nest app with one `@WhileLeader` duty
 * writing every 20 ms) on 3 fresh masters; a takeover is timed from the fault to the new term's
 * first write. No Node Redis lock library offers leader election, so there is no peer to run
 * beside it. Writes its section of bench/RESULTS.md (between the leadership markers).
 */
const { values: args } = parseArgs({
  options: { smoke: { type: 'boolean', default: false }, seconds: { type: 'string' }, out: { type: 'string' } },
});
const seconds = Number(args.seconds ?? (args.smoke ? 0 : 60));
const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const out = args.out ?? (args.smoke ? join(tmpdir(), 'nestjs-redlock-bench-leadership.md') : RESULTS);

const started = Date.now();
const loadAtStart = loadavg()[0]!;
const engine = engineSource();
const FAULTS: readonly { fault: Fault; label: string }[] = [
  { fault: 'kill', label: 'leader SIGKILLed (lease runs out)' },
  { fault: 'resign', label: 'leader shut down (resigns)' },
];
const rows: string[] = [];
for (const { fault, label } of FAULTS) {
  const result = await leadershipScenario(fault, true, seconds);
  const times = ascending(result.takeoverMs);
  const ms = (value: number) => value.toFixed(0);
  rows.push(
    `| ${label} | ${times.length} | ${ms(percentile(times, 50))} | ${ms(percentile(times, 99))} | ${ms(times[0]!)} | ${ms(times.at(-1)!)} | ${result.violations.length} |`,
  );
  console.log(rows.at(-1));
}

const machine = describeMachine();
const [start, end] = LEADERSHIP_MARKERS;
const section = [
  start,
  '## Leadership takeover',
  '',
  `Written by \`node --import ./test/support/ts-loader/register.mjs bench/leadership-takeover.ts\` on ` +
    `${new Date(started).toISOString().replace('T', ' ').slice(0, 16)} UTC (${seconds} s per fault; ` +
    `${((Date.now() - started) / 60_000).toFixed(1)} min). ${engine.label}.`,
  '',
  `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}, ` +
    `redis-server ${machine.redis}; load average (1 min) ${loadAtStart.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after.`,
  '',
  `Three replica processes (a Nest app with one \`@WhileLeader\` duty writing to a fenced store every 20 ms), lease ` +
    `${LEASE_MS} ms, 3 local masters, restart quarantine on. A takeover is timed from the fault to the new leader's ` +
    `first write; the faulted replica is then replaced by a fresh one and the next fault follows. No Node Redis lock ` +
    `library offers leader election, so no peer runs beside it.`,
  '',
  '| fault | takeovers | p50 (ms) | p99 (ms) | fastest (ms) | slowest (ms) | checker violations |',
  '|---|---|---|---|---|---|---|',
  ...rows,
  '',
  `After a SIGKILL the standby waits out the lease: it is woken when the lease's key expires (the refusal told it ` +
    `when), so a takeover takes what was left of the lease (between half of it and all of it: the leader renews at ` +
    `half) and a round. After a shutdown the leader's duty stops, the lease is released and the release wakes the ` +
    `first standby in the masters' queue.`,
  end,
].join('\n');
const previous = existsSync(out) ? readFileSync(out, 'utf8') : '';
writeFileSync(out, withSection(previous, section, LEADERSHIP_MARKERS));
console.log(`\n${section}\n\nwrote ${out}`);
