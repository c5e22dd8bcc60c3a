import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { freePort } from '../support/free-port.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { RedisFleet } from '../support/redis-fleet.js';

/**
 * Runs node-redlock's own ava tests (vendor/single.test.ts, vendor/multi.test.ts, from its tag
 * v5.0.0-beta.2) with the real ava against servers laid out like its docker-compose.yml, and
 * reads the result of every test from ava's TAP output.
 */

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VENDOR = new URL('./vendor/', import.meta.url);
const AVA_CONFIG = fileURLToPath(new URL('./ava.config.mjs', import.meta.url));
const AVA_BIN = fileURLToPath(new URL('../../node_modules/ava/entrypoints/cli.mjs', import.meta.url));

export const VENDORED_FILES = ['single.test.ts', 'multi.test.ts'] as const;

// ---------------------------------------------------------------------------------------------
// The implementations the vendored files can run against (vendor/index.ts re-exports one).

export type Implementation = 'redlock' | 'compat' | 'compat-dist';
export const IMPLEMENTATIONS: readonly Implementation[] = ['redlock', 'compat', 'compat-dist'];

/**
 * NR_IMPL: one implementation or a comma-separated list (`redlock,compat`). Unset: our compatible
 * entry point once lib/node-redlock/index.ts exists, node-redlock itself until then.
 */
export function implementationsFromEnv(value = process.env.NR_IMPL): Implementation[] {
  // Both by default: node-redlock itself passing on these servers is what makes a failure of ours mean something.
  if (!value?.trim()) return ['redlock', 'compat'];
  const names = value.split(',').map((name) => name.trim()).filter(Boolean);
  for (const name of names) {
    if (!(IMPLEMENTATIONS as readonly string[]).includes(name)) {
      throw new Error(`NR_IMPL=${value}: ${name} is none of ${IMPLEMENTATIONS.join(', ')}`);
    }
  }
  return [...new Set(names)] as Implementation[];
}

// ---------------------------------------------------------------------------------------------
// The test titles, read statically from the vendored sources (known when vitest collects).

export interface VendoredTest {
  /** The file, as ava names it in its output (`single`). */
  readonly file: string;
  /** The test's own title (`instance - locks automatically expire`). */
  readonly title: string;
  /** `single › instance - locks automatically expire`: what ava's TAP output prints. */
  readonly key: string;
}

export function vendoredTests(): VendoredTest[] {
  return VENDORED_FILES.flatMap((name) => {
    const source = readFileSync(new URL(name, VENDOR), 'utf8');
    const file = name.replace(/\.test\.ts$/, '');
    // run("instance", ...) / run(\n  "cluster", ...) at the bottom of each file.
    const namespaces = [...source.matchAll(/^run\(\s*"([^"]+)"/gm)].map((m) => m[1]!);
    // test(`${namespace} - the \`using\` helper is exclusive`, async (t) => {
    const names = [...source.matchAll(/^\s*test\(`\$\{namespace\} - ((?:[^`\\$]|\\.)*)`/gm)].map((m) =>
      m[1]!.replace(/\\(.)/g, '$1'),
    );
    // Any other test() call would be missed above: count them all to be sure.
    const calls = [...source.matchAll(/^\s*test\(/gm)].length;
    if (namespaces.length === 0 || names.length === 0 || names.length !== calls) {
      throw new Error(`${name}: found ${namespaces.length} run() calls and ${names.length} of ${calls} test titles`);
    }
    return namespaces.flatMap((namespace) =>
      names.map((test) => {
        const title = `${namespace} - ${test}`;
        return { file, title, key: `${file} › ${title}` };
      }),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Servers laid out like node-redlock's docker-compose.yml.

export interface NodeRedlockServers {
  /** NR_*_PORT variables for the vendored files' connection setup. */
  readonly env: Record<string, string>;
  readonly description: string;
  /**
   * Empties every master, so that a run starts as the first one did. The files' own `before`
   * hooks cannot do it on a Cluster (KEYS * reaches one node), and a test that failed after
   * acquiring leaves its lock (a duration of 28,000 years) for the next run to trip over.
   */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * redis-single-instance; redis-single-cluster (6 nodes, --cluster-replicas 1: 3 masters with a
 * replica each); redis-multi-instance-a/b/c; redis-multi-cluster-a/b/c (3 masters each,
 * --cluster-replicas 0). Each client is given one node's address, as in the original (the first
 * node of each cluster; ioredis discovers the rest). Plus a port where nothing listens, for the
 * unreachable-Redis test (the original used 127.0.0.1:6379, which on this machine is in use).
 */
export async function startServers(): Promise<NodeRedlockServers> {
  const started: { stopAll(): Promise<void> }[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(started.map((s) => s.stopAll()));
  };
  const track = async <T extends { stopAll(): Promise<void> }>(promise: Promise<T>): Promise<T> => {
    const value = await promise;
    started.push(value);
    return value;
  };
  try {
    const clusterOptions = { nodeTimeoutMs: 5_000 } as const; // cluster.redis.conf: cluster-node-timeout 5000
    const results = await Promise.allSettled([
      track(RedisFleet.start(1)),
      track(RedisFleet.start(3)),
      track(RedisCluster.start({ masters: 3, replicasPerMaster: 1, ...clusterOptions })),
      track(RedisCluster.start({ masters: 3, replicasPerMaster: 0, ...clusterOptions })),
      track(RedisCluster.start({ masters: 3, replicasPerMaster: 0, ...clusterOptions })),
      track(RedisCluster.start({ masters: 3, replicasPerMaster: 0, ...clusterOptions })),
    ]);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
    const [single, multi, singleCluster, clusterA, clusterB, clusterC] = results.map(
      (r) => (r as PromiseFulfilledResult<RedisFleet | RedisCluster>).value,
    ) as [RedisFleet, RedisFleet, RedisCluster, RedisCluster, RedisCluster, RedisCluster];
    const firstPort = (cluster: RedisCluster): number => cluster.fleet.nodes[0]!.port;
    const unreachable = await unusedPort();
    const env = {
      NR_SINGLE_INSTANCE_PORT: String(single.nodes[0]!.port),
      NR_SINGLE_CLUSTER_PORT: String(firstPort(singleCluster)),
      NR_MULTI_INSTANCE_A_PORT: String(multi.nodes[0]!.port),
      NR_MULTI_INSTANCE_B_PORT: String(multi.nodes[1]!.port),
      NR_MULTI_INSTANCE_C_PORT: String(multi.nodes[2]!.port),
      NR_MULTI_CLUSTER_A_PORT: String(firstPort(clusterA)),
      NR_MULTI_CLUSTER_B_PORT: String(firstPort(clusterB)),
      NR_MULTI_CLUSTER_C_PORT: String(firstPort(clusterC)),
      NR_UNREACHABLE_PORT: String(unreachable),
    };
    const description = Object.entries(env)
      .map(([name, port]) => `${name}=${port}`)
      .join(' ');
    const urls = [single, multi, singleCluster.fleet, clusterA.fleet, clusterB.fleet, clusterC.fleet].flatMap((fleet) => fleet.urls());
    const flush = async (): Promise<void> => {
      await Promise.all(
        urls.map(async (url) => {
          const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
          try {
            await client.connect();
            await client.flushall();
          } catch {
            // A Cluster replica refuses writes (READONLY): its master's flush reaches it.
          } finally {
            client.disconnect();
          }
        }),
      );
    };
    return { env, description, flush, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A port nothing listens on (checked: a connection to it is refused). */
async function unusedPort(): Promise<number> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const port = await freePort();
    if (await refused(port)) return port;
  }
  throw new Error('no port found that refuses connections');
}

export function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.setTimeout(1_000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

// ---------------------------------------------------------------------------------------------
// Running ava and reading its TAP output.

export interface AvaTestResult {
  readonly key: string;
  readonly ok: boolean;
  /** `skip` or `todo` when ava marked the test so. */
  readonly directive?: string;
  /** The YAML diagnostics ava printed under a failure (message, assertion, values, at). */
  readonly details: string;
}

export interface AvaRun {
  readonly implementation: Implementation;
  readonly exitCode: number | null;
  /** The verdict of every test, by `file › title`: the retry's where a test was retried. */
  readonly results: Map<string, AvaTestResult>;
  /** The first run's failures that passed when run again (see runAvaWithRetry), with the first verdict. */
  readonly passedOnRetry: AvaTestResult[];
  /** Failures not tied to a test: hooks, uncaught exceptions, timeouts, files that did not load. */
  readonly otherFailures: AvaTestResult[];
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

export const passed = (result: AvaTestResult | undefined): boolean => result?.ok === true && result.directive === undefined;

/** How many more runs a test failed by ava gets (see runAvaWithRetry). */
const AVA_RETRIES = 2;

/**
 * Runs ava over both vendored files; then runs again, up to AVA_RETRIES times, the tests that did not pass (each file
 * alone, `--match` on their titles). node-redlock's tests check TTLs to within 97-99 ms of a
 * lock's duration (floor(pttl / 200) against floor(duration / 200), the duration being
 * 900719925474099 ms, 99 above a multiple of 200) and auto-extension within 200 ms: on a starved
 * 2-core machine a first run can miss them by a few milliseconds. The retry runs them one at a
 * time (the first run keeps node-redlock's concurrency). A test that fails for a real
 * reason fails every time; one that passed only on retry is reported (AvaRun.passedOnRetry).
 * NR_RETRY=0 turns the retries off.
 */
export async function runAvaWithRetry(implementation: Implementation, serverEnv: Record<string, string>, flush: () => Promise<void>): Promise<AvaRun> {
  await flush();
  const first = await runAva(implementation, serverEnv);
  if (process.env.NR_RETRY === '0') return first;
  const tests = vendoredTests();
  let failed = tests.filter(({ key }) => !passed(first.results.get(key)));
  // Nothing ran at all (a file did not load): a retry would tell nothing new.
  if (failed.length === 0 || first.results.size === 0) return first;
  const results = new Map(first.results);
  const passedOnRetry: AvaTestResult[] = [];
  let { stdout, stderr, ms } = first;
  // Twice: upstream's own timing checks (an expiration within 200 ms of its ttl) failed node-redlock
  // itself two runs in a row beside a second copy of the suite.
  for (let retry = 1; retry <= AVA_RETRIES && failed.length > 0; retry++) {
    for (const file of VENDORED_FILES) {
      const prefix = file.replace(/\.test\.ts$/, '');
      const titles = failed.filter((t) => t.file === prefix).map((t) => t.title);
      if (titles.length === 0) continue;
      await flush();
      const again = await runAva(implementation, serverEnv, { file, titles });
      stdout += `\n# retry ${retry} of ${prefix}: ${titles.length} test(s)\n${again.stdout}`;
      stderr += again.stderr;
      ms += again.ms;
      for (const title of titles) {
        const key = `${prefix} › ${title}`;
        const result = again.results.get(key);
        if (!result) continue;
        if (passed(result) && first.results.has(key)) passedOnRetry.push(first.results.get(key)!);
        results.set(key, result);
      }
    }
    failed = failed.filter(({ key }) => !passed(results.get(key)));
  }
  return { ...first, results, passedOnRetry, stdout, stderr, ms };
}

/** One ava run: both vendored files, or one file's tests with the given titles. */
export async function runAva(
  implementation: Implementation,
  serverEnv: Record<string, string>,
  only?: { file: (typeof VENDORED_FILES)[number]; titles: string[] },
): Promise<AvaRun> {
  const startedAt = Date.now();
  // ava's --match is a pattern over titles: `*` is its only wildcard and a leading `!` negates;
  // node-redlock's titles have neither, so each matches itself alone.
  if (only?.titles.some((title) => title.includes('*') || title.startsWith('!'))) throw new Error('a title ava cannot --match literally');
  // A retry runs its tests one at a time (--serial): what it checks again is timing, not concurrency.
  const selection = only ? ['--serial', fileURLToPath(new URL(only.file, VENDOR)), ...only.titles.flatMap((title) => ['--match', title])] : [];
  const { exitCode, stdout, stderr } = await new Promise<{ exitCode: number | null; stdout: string; stderr: string }>(
    (resolve, reject) => {
      const child = execFile(
        process.execPath,
        [AVA_BIN, '--config', AVA_CONFIG, '--tap', ...selection],
        {
          cwd: ROOT,
          env: { ...process.env, ...serverEnv, NR_IMPL: implementation, CI: 'true', FORCE_COLOR: '0', NODE_OPTIONS: '' },
          maxBuffer: 64 * 1024 * 1024,
          timeout: 5 * 60_000,
          killSignal: 'SIGKILL',
        },
        (error, out, err) => {
          if (error && typeof error.code !== 'number' && !error.killed) reject(error);
          else resolve({ exitCode: child.exitCode, stdout: out, stderr: err });
        },
      );
    },
  );
  // ava prefixes titles with their file only when it runs several files.
  const { results, otherFailures } = parseTap(stdout, only?.file.replace(/\.test\.ts$/, ''));
  return { implementation, exitCode, results, passedOnRetry: [], otherFailures, stdout, stderr, ms: Date.now() - startedAt };
}

/**
 * ava's TAP: `ok 3 - single › instance - ...`, `not ok 4 - ...` then an indented YAML block.
 * `filePrefix`: the file's name to put before titles (ava prints none when it ran one file).
 */
export function parseTap(tap: string, filePrefix?: string): { results: Map<string, AvaTestResult>; otherFailures: AvaTestResult[] } {
  const results = new Map<string, AvaTestResult>();
  const otherFailures: AvaTestResult[] = [];
  const lines = tap.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const match = /^(not ok|ok)(?: \d+)?(?: - (.*?))?(?: # (SKIP|TODO)\b.*)?$/i.exec(lines[i]!);
    if (!match) continue;
    const ok = match[1] === 'ok';
    const title = (match[2] ?? '').trim();
    const key = filePrefix === undefined ? title : `${filePrefix} › ${title}`;
    let details = '';
    if (lines[i + 1]?.trim() === '---') {
      const block: string[] = [];
      for (i += 2; i < lines.length && lines[i]!.trim() !== '...'; i++) block.push(lines[i]!);
      details = block.join('\n');
    }
    const result: AvaTestResult = { key, ok, details, ...(match[3] ? { directive: match[3].toLowerCase() } : {}) };
    if (results.has(key) || !/ › /.test(key)) otherFailures.push(result);
    else results.set(key, result);
  }
  return { results, otherFailures: otherFailures.filter((r) => !r.ok) };
}
