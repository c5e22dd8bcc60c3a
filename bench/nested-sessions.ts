// What nested sessions inside one long `using` leave on the heap until it ends (issue 28, item 11).
//
//   node --expose-gc --import ./test/support/ts-loader/register.mjs bench/nested-sessions.ts \
//     [--calls 400000] [--kind nested|reentrant] [--masters redis://127.0.0.1:7001,...]
//
// Without --masters it runs on the in-memory engine, which enters sessions through the same code.
// Prints one JSON line: heap before and after (MB, after two global.gc()) and bytes per call.
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Redlock } from '../lib/index.js';
import { InMemoryRedlock, type RedlockEngine } from '../lib/testing/index.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '400000' },
    kind: { type: 'string', default: 'nested' },
    masters: { type: 'string' },
  },
});
const calls = Number(values.calls);
if (!Number.isSafeInteger(calls) || calls <= 0) throw new Error(`--calls: expected a positive integer, got ${values.calls}`);
if (values.kind !== 'nested' && values.kind !== 'reentrant') throw new Error(`--kind: expected nested or reentrant, got ${values.kind}`);
const gc = globalThis.gc;
if (!gc) throw new Error('run with node --expose-gc');

const clients = values.masters?.split(',').map((url) => new Redis(url, { enableAutoPipelining: true }));
const engine: RedlockEngine = clients ? new Redlock(clients, { restartQuarantineMs: false, nodeTimeoutMs: 2_000 }) : new InMemoryRedlock();
// A nested call takes a key of its own; a reentrant one asks again for the outer key.
const inner = values.kind === 'nested' ? `bench:nested:${process.pid}:inner` : `bench:nested:${process.pid}:outer`;
const MB = 1024 * 1024;
const heap = () => (gc(), gc(), process.memoryUsage().heapUsed);

async function nestedCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await engine.using(inner, 60_000, async () => i);
    // Between batches the loop turns, as it does between requests in a server: objects V8 keeps
    // for the rest of a job (WeakRef targets) are let go, so what stays is what is really held.
    if (i % 1_000 === 999) await new Promise((resolve) => setImmediate(resolve));
  }
}

try {
  const result = await engine.using(`bench:nested:${process.pid}:outer`, 600_000, async () => {
    await nestedCalls(Math.min(1_000, calls));
    const before = heap();
    await nestedCalls(calls);
    const after = heap();
    return { kind: values.kind, calls, engine: clients ? 'redis' : 'in-memory', heapBeforeMB: before / MB, heapAfterMB: after / MB, bytesPerCall: (after - before) / calls };
  });
  console.log(JSON.stringify(result));
} finally {
  for (const client of clients ?? []) client.disconnect();
}
