import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { Redlock } from '../lib/core/index.js';
import { SentinelGroup } from '../test/support/sentinel-group.js';
import { REPLICA_ACKS_MARKERS, withSection } from './report.js';
import { connect, disconnect } from './support/clients.js';
import { describeMachine, engineSource } from './support/machine.js';
import { ascending, median, percentile } from './support/stats.js';

/**
 * `node --import ./test/support/ts-loader/register.mjs bench/replica-acks.ts [--reps N] [--smoke]`:
 * what `replicaAcks: 1` costs scenario 1 (one caller, acquire + release on fresh keys, no
 * auto-pipelining), on 5 masters with one replica each (10 redis-server processes, started here).
 * Both settings run in one process, taking turns in short blocks after the same warm-up, so the
 * machine's ups and downs fall on both alike. Writes its section of bench/RESULTS.md (between the
 * replica-acks markers, which the full benchmark keeps).
 */
const { values: args } = parseArgs({
  options: { smoke: { type: 'boolean', default: false }, reps: { type: 'string' }, out: { type: 'string' } },
});
const mode = args.smoke ? 'smoke' : 'full';
const reps = Number(args.reps ?? (args.smoke ? 1 : 3));
const PARAMS = {
  full: { warmup: 3_000, blocks: 8, cycles: 500, ttlMs: 10_000 },
  smoke: { warmup: 50, blocks: 2, cycles: 50, ttlMs: 10_000 },
}[mode];
const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const out = args.out ?? (args.smoke ? join(tmpdir(), 'nestjs-redlock-bench-replica-acks.md') : RESULTS);
const WAYS = [0, 1] as const;
type Way = (typeof WAYS)[number];

interface WayFigures {
  cycles: number[];
  acquires: number[];
}

const started = Date.now();
const loadAtStart = loadavg()[0]!;
const engine = engineSource();
/** Per repetition and setting: cycle p50, cycle p99, acquire p50. */
const figures: Record<Way, { cycleP50: number[]; cycleP99: number[]; acquireP50: number[] }> = {
  0: { cycleP50: [], cycleP99: [], acquireP50: [] },
  1: { cycleP50: [], cycleP99: [], acquireP50: [] },
};
/** Acquires that failed (no quorum within the round), per setting, over the whole run. */
const failed: Record<Way, number> = { 0: 0, 1: 0 };
const groups = await Promise.all(Array.from({ length: 5 }, (_, i) => SentinelGroup.start({ name: `bench-${i}`, sentinels: 0 })));
try {
  const urls = groups.map((group) => group.masterUrl());
  for (let rep = 0; rep < reps; rep++) {
    const engines = new Map<Way, { redlock: Redlock; clients: Redis[] }>();
    for (const way of WAYS) {
      const clients = await connect(urls, false);
      // Servers nobody locked on before: the restart quarantine has nothing to protect here.
      const redlock = new Redlock(clients, { replicaAcks: way, restartQuarantineMs: false });
      await redlock.verifyMasters(); // identified before the first round, as a long-lived engine is
      engines.set(way, { redlock, clients });
    }
    const measured: Record<Way, WayFigures> = { 0: { cycles: [], acquires: [] }, 1: { cycles: [], acquires: [] } };
    const prefix = `bench:replica-acks:${process.pid}:${rep}`;
    let key = 0;
    const cycle = async (way: Way, into?: WayFigures) => {
      const start = performance.now();
      const lock = await engines
        .get(way)!
        .redlock.acquire(`${prefix}:${key++}`, PARAMS.ttlMs)
        .catch((error: unknown) => {
          // A round that found no quorum in time (a loaded machine): counted, not measured.
          failed[way]++;
          if (failed[way] <= 3) console.error(`replicaAcks ${way}: ${(error as Error).message}`);
          return undefined;
        });
      if (!lock) return;
      const acquired = performance.now();
      await lock.release();
      into?.cycles.push(performance.now() - start);
      into?.acquires.push(acquired - start);
    };
    for (let i = 0; i < PARAMS.warmup; i++) for (const way of WAYS) await cycle(way);
    for (let block = 0; block < PARAMS.blocks; block++) {
      // Alternate which setting goes first, so neither always follows the other.
      for (const way of block % 2 === 0 ? WAYS : [...WAYS].reverse()) {
        for (let i = 0; i < PARAMS.cycles; i++) await cycle(way, measured[way]);
      }
    }
    for (const way of WAYS) {
      const cycles = ascending(measured[way].cycles);
      figures[way].cycleP50.push(percentile(cycles, 50));
      figures[way].cycleP99.push(percentile(cycles, 99));
      figures[way].acquireP50.push(percentile(ascending(measured[way].acquires), 50));
      const { redlock, clients } = engines.get(way)!;
      redlock.close();
      disconnect(clients);
    }
    console.log(
      `[rep ${rep + 1}/${reps}] ` +
        WAYS.map((way) => `replicaAcks ${way}: cycle p50 ${figures[way].cycleP50.at(-1)!.toFixed(3)} ms, acquire p50 ${figures[way].acquireP50.at(-1)!.toFixed(3)} ms`).join('; '),
    );
  }
} finally {
  await Promise.all(groups.map((group) => group.stopAll()));
}

const section = render();
const previous = existsSync(out) ? readFileSync(out, 'utf8') : '';
writeFileSync(out, withSection(previous, section, REPLICA_ACKS_MARKERS));
console.log(`\n${section}\n\nwrote ${out}`);

function render(): string {
  const machine = describeMachine();
  const fmt = (value: number) => value.toFixed(3);
  const row = (label: string, pick: (way: Way) => number[]) => {
    const [off, on] = WAYS.map((way) => median(pick(way)));
    const each = (way: Way) => pick(way).map(fmt).join(', ');
    return `| ${label} | ${fmt(off!)} | ${fmt(on!)} | +${fmt(on! - off!)} (${((on! / off! - 1) * 100).toFixed(0)}%) | ${each(0)} / ${each(1)} |`;
  };
  const [start, end] = REPLICA_ACKS_MARKERS;
  return [
    start,
    '## What replicaAcks costs (bench/replica-acks.ts)',
    '',
    `Written by \`node --import ./test/support/ts-loader/register.mjs bench/replica-acks.ts\` on ` +
      `${new Date(started).toISOString().replace('T', ' ').slice(0, 16)} UTC (${mode} run, ${reps} repetition(s), each figure the ` +
      `median of the repetitions; ${((Date.now() - started) / 60_000).toFixed(1)} min). ${engine.label}.`,
    '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}, ` +
      `redis-server ${machine.redis}; load average (1 min) ${loadAtStart.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after.`,
    '',
    `Scenario 1 (one caller, acquire + release on a fresh key each, ttl ${PARAMS.ttlMs} ms, no auto-pipelining) on 5 local ` +
      `masters, each with one replica (10 redis-server processes). One process, one engine per setting with its own ` +
      `clients, ${PARAMS.warmup} warm-up cycles each, then ${PARAMS.blocks} blocks of ${PARAMS.cycles} cycles per setting, ` +
      `taking turns. With \`replicaAcks: 1\` each acquire's SET NX is followed on the same connection by \`WAIT 1 75\`, ` +
      `and its master's vote counts once the replica has the key; releases do not wait, but on a master whose WAIT ` +
      `has not answered when the lock is granted (not needed for the quorum) the release queues behind it, which is ` +
      `why the cycle costs a little more than the acquire.`,
    '',
    '| figure | replicaAcks 0 | replicaAcks 1 | cost | repetitions (0 / 1) |',
    '|---|---|---|---|---|',
    row('cycle p50 (ms)', (way) => figures[way].cycleP50),
    row('cycle p99 (ms)', (way) => figures[way].cycleP99),
    row('acquire p50 (ms)', (way) => figures[way].acquireP50),
    '',
    `Failed acquires (no quorum within the round, not measured): ${failed[0]} with replicaAcks 0, ${failed[1]} with replicaAcks 1.`,
    '',
    'Over loopback a replica acknowledges within one more round trip between master and replica; across machines the ' +
      'cost is one network round trip from each master of the granting quorum to its replica, on top of the acquire. ' +
      "Absolute figures depend on the machine's load (see above); the difference between the two settings, measured side " +
      'by side, is the cost.',
    end,
  ].join('\n');
}
