// Stands in for node-redlock's src/index.ts, which single.test.ts and multi.test.ts import as
// "./index.js" (a line kept unmodified). It re-exports the implementation under test, chosen by
// NR_IMPL (set by test/node-redlock/harness.ts):
//   redlock      the npm package redlock@5.0.0-beta.2 (node-redlock itself, the reference);
//   compat       this repo's compatible entry point, from source: lib/node-redlock/index.ts;
//   compat-dist  the same as built and shipped: the package subpath nestjs-redlock/node-redlock
//                (needs `npm run build`).
// It also refuses to load unless every server port the vendored files connect to is set, so a
// file run by hand cannot fall back to ioredis's default 127.0.0.1:6379 (a developer's Redis,
// which the suite's `before` hooks would empty with KEYS * / DEL).

const PORT_VARIABLES = [
  'NR_SINGLE_INSTANCE_PORT',
  'NR_SINGLE_CLUSTER_PORT',
  'NR_MULTI_INSTANCE_A_PORT',
  'NR_MULTI_INSTANCE_B_PORT',
  'NR_MULTI_INSTANCE_C_PORT',
  'NR_MULTI_CLUSTER_A_PORT',
  'NR_MULTI_CLUSTER_B_PORT',
  'NR_MULTI_CLUSTER_C_PORT',
  'NR_UNREACHABLE_PORT',
] as const;

for (const name of PORT_VARIABLES) {
  const port = Number(process.env[name]);
  if (!Number.isInteger(port) || port <= 0 || port > 65_535 || port === 6379) {
    throw new Error(`${name}=${process.env[name] ?? ''}: the vendored node-redlock tests need a test server's port here (never 6379)`);
  }
}

// Loosely typed on purpose: the vendored files are not type-checked here (see tsconfig.json), and
// redlock's own declarations are out of reach under nodenext (bench/adapters/redlock.d.ts).
type Constructor = new (...args: never[]) => unknown;
interface Implementation {
  default: Constructor;
  ExecutionError: Constructor;
  ResourceLockedError: Constructor;
  Lock: Constructor;
}

// Specifiers held in variables: the compatible entry point need not exist for this file to type-check.
const SOURCES: Record<string, string> = {
  redlock: 'redlock',
  compat: new URL('../../../lib/node-redlock/index.ts', import.meta.url).href,
  'compat-dist': 'nestjs-redlock/node-redlock',
};

const impl = process.env.NR_IMPL ?? '';
const source = SOURCES[impl];
if (source === undefined) throw new Error(`NR_IMPL=${impl}: expected one of ${Object.keys(SOURCES).join(', ')}`);
const loaded = (await import(source)) as Implementation;
for (const name of ['default', 'ExecutionError', 'ResourceLockedError', 'Lock'] as const) {
  if (typeof loaded[name] !== 'function') throw new Error(`NR_IMPL=${impl} (${source}) exports no ${name}`);
}

export default loaded.default;
export const ExecutionError = loaded.ExecutionError;
export const ResourceLockedError = loaded.ResourceLockedError;
export const Lock = loaded.Lock;
