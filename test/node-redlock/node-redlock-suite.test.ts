import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  implementationsFromEnv,
  passed,
  runAvaWithRetry,
  startServers,
  vendoredTests,
  type AvaRun,
  type Implementation,
  type NodeRedlockServers,
} from './harness.js';

/**
 * node-redlock's own test files (src/single.test.ts and src/multi.test.ts at v5.0.0-beta.2, in
 * vendor/, unmodified but for their connection setup: see vendor/README.md), run by the real ava
 * against real servers laid out like node-redlock's docker-compose.yml: one standalone instance
 * and one Cluster of 3 masters with a replica each for single.test.ts; three standalone instances
 * and three Clusters of 3 masters (no replicas) for multi.test.ts.
 *
 * One vitest test per ava test (24), for each implementation in NR_IMPL (comma-separated):
 *   redlock      the npm package redlock@5.0.0-beta.2 itself, the reference: every test must pass;
 *   compat       our compatible entry point lib/node-redlock/index.ts (from source);
 *   compat-dist  the same as built, the package subpath nestjs-redlock/node-redlock (`npm run build` first).
 * Unset: redlock, then compat (node-redlock passing on these servers is the control for ours).
 * `NR_IMPL=redlock,compat npx vitest run test/node-redlock` compares both in one run.
 */

/**
 * The ava tests that assert behaviour the guide lists as deliberately different in our compatible
 * entry point, keyed `file › title` as ava prints them (`single › instance - ...`), each with the
 * reason (the guide's section). For compat and compat-dist such a test must FAIL (so the list
 * cannot go stale); node-redlock itself must still pass it.
 */
const DELIBERATELY_DIFFERENT: Record<string, string> = {};

const TESTS = vendoredTests();
const IMPLEMENTATIONS = implementationsFromEnv();

for (const key of Object.keys(DELIBERATELY_DIFFERENT)) {
  if (!TESTS.some((t) => t.key === key)) throw new Error(`DELIBERATELY_DIFFERENT names no vendored test: ${key}`);
}

let servers: NodeRedlockServers | undefined;

beforeAll(async () => {
  servers = await startServers();
}, 180_000);

afterAll(async () => {
  await servers?.stop();
}, 60_000);

function tail(text: string, chars = 3_000): string {
  return text.length > chars ? `…${text.slice(-chars)}` : text;
}

describe.each(IMPLEMENTATIONS)('node-redlock v5.0.0-beta.2 own ava tests on %s', (implementation: Implementation) => {
  let run: AvaRun | undefined;

  beforeAll(async () => {
    if (!servers) throw new Error('the servers did not start');
    run = await runAvaWithRetry(implementation, servers.env, servers.flush);
  }, 360_000);

  // The tally to quote ("24/24 on node-redlock, N/24 on ours"): ava's own verdicts, whatever
  // DELIBERATELY_DIFFERENT expects.
  afterAll(() => {
    if (!run) return;
    const count = TESTS.filter(({ key }) => passed(run!.results.get(key))).length;
    const retried = run.passedOnRetry.map((r) => `\n  passed on retry: ${r.key}\n${r.details}`).join('');
    const onRetry = run.passedOnRetry.length > 0 ? `, ${run.passedOnRetry.length} of them on a second run` : '';
    console.log(`node-redlock v5.0.0-beta.2's own tests on ${implementation}: ${count}/${TESTS.length} passed in ava${onRetry} (${run.ms} ms)${retried}`);
  });

  // A plain loop, not test.each: vitest would quote and shorten the titles it interpolates.
  for (const { key } of TESTS) {
    test(key, () => {
      if (!run) throw new Error('ava did not run');
      const result = run.results.get(key);
      if (!result) {
        const others = run.otherFailures.map((f) => `${f.key}\n${f.details}`).join('\n\n');
        throw new Error(
          `ava reported no result for "${key}" (ava exit code ${run.exitCode}).\n${others}\n` +
            `--- ava stdout ---\n${tail(run.stdout)}\n--- ava stderr ---\n${tail(run.stderr)}`,
        );
      }
      const ok = passed(result);
      const verdict = `ava: ${result.ok ? 'ok' : 'not ok'}${result.directive ? ` # ${result.directive}` : ''}\n${result.details}`;
      const reason = implementation === 'redlock' ? undefined : DELIBERATELY_DIFFERENT[key];
      if (reason !== undefined) {
        expect(ok, `listed as deliberately different (${reason}), yet it passed: take it off DELIBERATELY_DIFFERENT`).toBe(false);
      } else {
        expect(ok, verdict).toBe(true);
      }
    });
  }
});
