#!/usr/bin/env node
// Compatibility suite: installs the package as users get it (the tarball `npm pack` makes, not
// the repository's own dist/ through a self-reference) into the small apps under test/compat/,
// and runs each against 3 real Redis masters.
//
//   npm run build && node test/compat/run.mjs [--only name,name] [--jobs N] [--keep] [--tarball file.tgz]
//
// --tarball checks a given tarball instead of packing this repository (a published version, or
// a deliberately broken one to see that the suite catches it).
//
// Each fixture is copied to a temp dir first: run in place, Node would walk up into this
// repository's node_modules (Nest 12, TypeScript 7) and every fixture would test those instead.
// Plain Node ESM on purpose, self-contained (no TypeScript loader, no test/support import):
// it must run on a fresh clone right after `npm ci && npm run build`.
//
// Each fixture has its own package.json and package-lock.json and does not list nestjs-redlock:
// the runner installs the tarball over `npm ci` with `npm install --no-save`. After changing a
// fixture's dependencies, refresh its lockfile with `npm install --package-lock-only` in its dir.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, isAbsolute, join, posix, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '../..');
const RESERVED_PORT = 6379; // the developer's own Redis: never bound, never connected to
const MASTERS = 3;
const INSTALL_TIMEOUT_MS = 240_000;
const STEP_TIMEOUT_MS = 120_000;
const TAIL_LINES = 60;

const { values: args } = parseArgs({
  options: {
    only: { type: 'string' },
    jobs: { type: 'string', default: '2' },
    keep: { type: 'boolean', default: false },
    tarball: { type: 'string' },
  },
});

// ---- the fixtures ----------------------------------------------------------------------------

const npm = (...rest) => ({ label: `npm ${rest.join(' ')}`, cmd: 'npm', args: rest });
const bin = (name, ...rest) => ({ label: `${name} ${rest.join(' ')}`, cmd: `node_modules/.bin/${name}`, args: rest });
const node = (...rest) => ({ label: `node ${rest.join(' ')}`, cmd: process.execPath, args: rest });
const serve = (entry) => ({ label: `serve ${entry} (HTTP checks)`, serve: entry });

/** Longest first: with 2 at a time, the long installs overlap the short fixtures. */
const FIXTURES = [
  {
    // The README's quick start, built from its code blocks (see markdownFiles below).
    name: 'nest11-readme',
    markdown: ['README.md', 'docs/production.md'],
    steps: [npm('run', 'build'), npm('test'), npm('run', 'test:e2e')],
  },
  {
    name: 'nest11-cjs-jest',
    steps: [npm('run', 'build'), serve('dist/main.js'), node('test/one-copy.js'), npm('run', 'test:e2e')],
  },
  { name: 'nest12-esm-vitest', steps: [npm('run', 'build'), serve('dist/main.js'), npm('run', 'test:e2e')] },
  { name: 'nest11-cjs-fastify', steps: [npm('run', 'build'), serve('dist/main.js')] },
  {
    name: 'types',
    steps: [
      bin('tsc', '--noEmit', '-p', 'tsconfig.node10.json'),
      bin('tsc', '--noEmit', '-p', 'tsconfig.nodenext.json'),
      bin('tsc', '--noEmit', '-p', 'tsconfig.bundler.json'),
    ],
  },
  {
    name: 'node-core',
    steps: [node('check-cjs.cjs'), node('check-esm.mjs'), node('one-copy.mjs'), node('no-nest.cjs'), node('check-cli.mjs')],
  },
];

// ---- cleanup: nothing started here outlives the runner ---------------------------------------

const children = new Set(); // every live child process, killed by pid (or its own group) at exit
const dirs = new Set();

function killEverythingSync() {
  for (const child of children) {
    try {
      // Steps run in their own process group (npm → node → jest workers): kill the group.
      if (child.ownGroup) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  if (!args.keep) for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', killEverythingSync);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping`);
    process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 })[signal]);
  });
}

/**
 * Runs a command; resolves with { code, output } (stdout and stderr interleaved). Never
 * rejects: a timeout kills the whole process group and reports code 'timeout'.
 */
function run(cmd, cmdArgs, { cwd, env, timeoutMs = STEP_TIMEOUT_MS } = {}) {
  return new Promise((resolvePromise) => {
    let output = '';
    const child = spawn(cmd, cmdArgs, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.ownGroup = true;
    children.add(child);
    child.stdout.on('data', (data) => (output += data));
    child.stderr.on('data', (data) => (output += data));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone meanwhile */
      }
    }, timeoutMs);
    const done = (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolvePromise({ code: timedOut ? 'timeout' : code, output });
    };
    child.once('error', (error) => {
      output += `\n${error.message}`;
      done(-1);
    });
    child.once('close', (code, signal) => done(code ?? signal));
  });
}

const tail = (text, lines = TAIL_LINES) => text.trimEnd().split('\n').slice(-lines).join('\n');
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

// ---- Redis masters ---------------------------------------------------------------------------

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const { port } = server.address();
      server.close(() => (port === RESERVED_PORT ? freePort().then(resolvePort, reject) : resolvePort(port)));
    });
  });
}

function findRedisServer() {
  const fromEnv = process.env.REDIS_SERVER_BIN;
  if (fromEnv) return resolve(fromEnv);
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue; // never a ./redis-server picked up from cwd
    const candidate = join(dir, 'redis-server');
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  throw new Error('redis-server not found: install it (apt-get install -y redis-server) or set REDIS_SERVER_BIN');
}

/**
 * PING must answer +PONG and INFO must report our child's pid: a server someone else started on
 * the port in the free-port race would answer PONG too.
 */
function probe(port, pid) {
  return new Promise((resolveProbe) => {
    let buffer = '';
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (ok) => {
      socket.destroy();
      resolveProbe(ok);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.on('error', () => finish(false));
    socket.once('close', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\nINFO server\r\n'));
    socket.on('data', (data) => {
      buffer += data.toString('latin1');
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(buffer);
      if (match) finish(buffer.startsWith('+PONG\r\n') && Number(match[1]) === pid);
    });
  });
}

async function startMaster(binary, workDir, index) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = join(workDir, `redis-${index}`);
    mkdirSync(dir, { recursive: true });
    const child = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
        '--protected-mode', 'no', '--daemonize', 'no', '--logfile', join(dir, 'redis.log')],
      { stdio: 'ignore' },
    );
    children.add(child);
    let exited = false;
    child.once('exit', () => {
      exited = true;
      children.delete(child);
    });
    child.once('error', () => (exited = true));
    const deadline = Date.now() + 10_000;
    while (!exited && Date.now() < deadline) {
      if (await probe(port, child.pid)) return { port, url: `redis://127.0.0.1:${port}`, child };
      await sleep(50);
    }
    child.kill('SIGKILL');
    const log = existsSync(join(dir, 'redis.log')) ? readFileSync(join(dir, 'redis.log'), 'utf8') : '';
    if (/Address already in use/.test(log) && attempt < 5) continue;
    throw new Error(`redis-server on port ${port} did not start\n${tail(log, 20)}`);
  }
}

// ---- the tarball -----------------------------------------------------------------------------

async function pack(workDir) {
  let file;
  if (args.tarball) {
    file = join(workDir, basename(args.tarball));
    cpSync(resolve(args.tarball), file);
  } else {
    if (!existsSync(join(REPO, 'dist'))) throw new Error('no dist/: run `npm run build` in the repository first');
    const packed = await run('npm', ['pack', '--pack-destination', workDir], { cwd: REPO, timeoutMs: 180_000 });
    if (packed.code !== 0) throw new Error(`npm pack failed:\n${tail(packed.output)}`);
    const tgz = readdirSync(workDir).find((name) => name.endsWith('.tgz'));
    if (!tgz) throw new Error(`npm pack made no tarball:\n${tail(packed.output)}`);
    file = join(workDir, tgz);
  }
  const unpackDir = join(workDir, 'unpacked');
  mkdirSync(unpackDir);
  const untar = await run('tar', ['-xzf', file, '-C', unpackDir]);
  if (untar.code !== 0) throw new Error(`tar failed:\n${untar.output}`);
  const root = join(unpackDir, 'package');
  const files = listFiles(root);
  const unpacked = files.reduce((sum, rel) => sum + statSync(join(root, rel)).size, 0);
  return { file, root, files, size: statSync(file).size, unpacked };
}

function listFiles(dir, prefix = '') {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listFiles(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  );
}

/** Targets of "main", "types" and every "exports" condition, as paths inside the package. */
function entryTargets(manifest) {
  const targets = new Set();
  const walk = (value) => {
    if (typeof value === 'string') targets.add(posix.normalize(value));
    else if (value && typeof value === 'object') Object.values(value).forEach(walk);
  };
  walk(manifest.exports);
  for (const field of ['main', 'module', 'types', 'typings']) if (manifest[field]) walk(manifest[field]);
  return [...targets].filter((target) => !target.includes('*'));
}

/** What a user sees of the package before any code runs: entry points, license, source maps. */
function checkTarball(tarball) {
  const problems = [];
  const present = new Set(tarball.files);
  const manifest = JSON.parse(readFileSync(join(tarball.root, 'package.json'), 'utf8'));
  for (const target of entryTargets(manifest)) {
    if (!present.has(target)) problems.push(`package.json points at ${target}, which is not in the tarball`);
  }
  for (const required of ['README.md', 'package.json']) {
    if (!present.has(required)) problems.push(`${required} is not in the tarball`);
  }
  if (!tarball.files.some((file) => /^licen[cs]e(\.|$)/i.test(file))) problems.push('no LICENSE file in the tarball');
  if (!manifest.exports?.['./core']) problems.push('package.json "exports" has no "./core"');
  // A map must lead a debugger to the source: either the file it names is shipped, or the
  // map carries the text itself.
  const maps = tarball.files.filter((name) => name.endsWith('.map'));
  const unresolved = [];
  for (const file of maps) {
    const map = JSON.parse(readFileSync(join(tarball.root, file), 'utf8'));
    (map.sources ?? []).forEach((source, i) => {
      const shipped = present.has(posix.normalize(posix.join(posix.dirname(file), map.sourceRoot ?? '', source)));
      if (!shipped && typeof map.sourcesContent?.[i] !== 'string') unresolved.push(`${file} → ${source}`);
    });
  }
  if (unresolved.length) {
    problems.push(`${unresolved.length} source map sources are neither in the tarball nor in sourcesContent, e.g.`);
    problems.push(...unresolved.slice(0, 5).map((line) => `  ${line}`));
  }
  const summary = `${tarball.files.length} files, ${maps.length} source maps, ${entryTargets(manifest).length} entry targets`;
  return { problems, summary };
}

// ---- serving an app and checking it over HTTP ------------------------------------------------

async function waitForHttp(url, child, deadlineMs) {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      await fetch(url, { signal: AbortSignal.timeout(1_000) });
      return true;
    } catch {
      await sleep(100);
    }
  }
  return false;
}

/**
 * `node <entry>` as the app would run in production, then the routes of every Nest fixture:
 * the @WithLock route lets one of two concurrent requests in and answers the other 409 with
 * Retry-After, the RedlockService.using route serialises two requests, and SIGTERM shuts the
 * app down (locks released, connections closed) instead of leaving it hanging.
 */
async function serveAndCheck(entry, cwd, env) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const log = [];
  let output = '';
  const child = spawn(process.execPath, [entry], { cwd, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.stdout.on('data', (data) => (output += data));
  child.stderr.on('data', (data) => (output += data));
  const exited = new Promise((resolveExit) => child.once('exit', (code, signal) => resolveExit({ code, signal })));
  void exited.then(() => children.delete(child));
  const check = (ok, message) => {
    log.push(`${ok ? 'ok  ' : 'FAIL'} ${message}`);
    if (!ok) throw new Error(message);
  };
  try {
    check(await waitForHttp(base, child, 30_000), `node ${entry} listens on ${base}`);

    // One request first, whatever it answers: a fresh process's first lock round (cold code, lazy
    // requires) can outlast the 100 ms default node timeout on a loaded CI box and answer 503
    // (seen once with another copy of the suite beside it); the pair below checks the lock, not that.
    await fetch(`${base}/orders/${randomUUID()}/pay`, { method: 'POST' }).catch(() => {});
    const id = randomUUID();
    const payments = await Promise.all([0, 1].map(() => fetch(`${base}/orders/${id}/pay`, { method: 'POST' })));
    const statuses = payments.map((r) => r.status).sort();
    check(statuses[0] === 201 && statuses[1] === 409, `two concurrent POST /orders/:id/pay → [201, 409] (got [${statuses}])`);
    const refused = payments.find((r) => r.status === 409);
    const retryAfter = refused?.headers.get('retry-after');
    check(/^[1-9]\d*$/.test(retryAfter ?? ''), `the 409 carries Retry-After (got ${JSON.stringify(retryAfter)})`);
    const body = await refused.json();
    check(JSON.stringify(body.resources) === JSON.stringify([`order:${id}`]), `the 409 body names order:${id}`);
    const again = await fetch(`${base}/orders/${id}/pay`, { method: 'POST' });
    check(again.status === 201, `after the holder finished, the next payment → 201 (got ${again.status})`);

    const day = randomUUID();
    const rebuilds = await Promise.all([0, 1].map(() => fetch(`${base}/reports/${day}/rebuild`, { method: 'POST' })));
    const results = await Promise.all(rebuilds.map(async (r) => ({ status: r.status, body: await r.json() })));
    check(
      results.every((r) => r.status === 201 && r.body.overlapped === false),
      `two concurrent RedlockService.using rebuilds → both 201, never inside together (got ${JSON.stringify(results)})`,
    );

    child.kill('SIGTERM');
    const stopped = await Promise.race([exited, sleep(10_000, null)]);
    check(stopped !== null, 'SIGTERM stops the app within 10 s (enableShutdownHooks: locks released, connections closed)');
    return { ok: true, output: `${log.join('\n')}\n--- app output ---\n${output}` };
  } catch (error) {
    if (!log.at(-1)?.startsWith('FAIL')) log.push(`FAIL ${error.message}`);
    return { ok: false, output: `${log.join('\n')}\n--- app output ---\n${output}` };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  }
}

// ---- one fixture ---------------------------------------------------------------------------

async function runFixture(fixture, { workDir, tarball, env }) {
  const started = Date.now();
  const cwd = join(workDir, fixture.name);
  // node_modules, dist and build info of a local try-out would hide a missing install step.
  cpSync(join(HERE, fixture.name), cwd, {
    recursive: true,
    filter: (src) => !['node_modules', 'dist'].includes(basename(src)) && !src.endsWith('.tsbuildinfo'),
  });
  for (const [path, code] of markdownFiles(fixture.markdown ?? [])) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true });
    writeFileSync(join(cwd, path), code);
  }
  const steps = [
    { label: 'npm ci', cmd: 'npm', args: ['ci', '--no-audit', '--no-fund', '--prefer-offline'], timeoutMs: INSTALL_TIMEOUT_MS },
    { label: 'npm install --no-save <tarball>', cmd: 'npm', args: ['install', '--no-save', '--no-audit', '--no-fund', '--prefer-offline', tarball.file], timeoutMs: INSTALL_TIMEOUT_MS },
    ...fixture.steps,
  ];
  const done = [];
  for (const step of steps) {
    const stepStarted = Date.now();
    const result = step.serve
      ? await serveAndCheck(step.serve, cwd, env)
      : await run(step.cmd, step.args, { cwd, env, timeoutMs: step.timeoutMs });
    const ok = step.serve ? result.ok : result.code === 0;
    writeFileSync(join(cwd, `compat-step-${done.length + 1}.log`), result.output);
    done.push(`${step.label} (${seconds(Date.now() - stepStarted)})`);
    if (!ok) {
      const how = step.serve ? '' : ` (exit ${result.code})`;
      return { name: fixture.name, ok: false, ms: Date.now() - started, done, failure: `${step.label}${how}`, output: result.output };
    }
  }
  return { name: fixture.name, ok: true, ms: Date.now() - started, done };
}

/**
 * The code blocks of these markdown files (paths from the repository's root) that name their
 * file in a first-line comment, `// src/orders.service.ts`: a fixture built from them runs what a
 * reader pastes. A file named twice is an error.
 */
function markdownFiles(markdownPaths) {
  const files = new Map();
  for (const markdownPath of markdownPaths) {
    const markdown = readFileSync(join(REPO, markdownPath), 'utf8');
    for (const [, code] of markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) {
      const path = /^\/\/ ((?:src|test)\/[\w./-]+\.ts)\n/.exec(code)?.[1];
      if (!path) continue;
      if (files.has(path)) throw new Error(`${markdownPath}: ${path} is named by two code blocks`);
      files.set(path, code);
    }
  }
  return files;
}

/** Runs `tasks` (functions returning promises) at most `jobs` at a time, in order. */
async function pool(tasks, jobs) {
  const results = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(jobs, tasks.length) }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await tasks[index]();
      }
    }),
  );
  return results;
}

// ---- publint and attw (only when the repository has them) ------------------------------------

async function lintTools(tarball, env) {
  const results = [];
  const tools = [
    { name: 'publint', binary: 'publint', args: ['run', tarball.file, '--strict'] },
    // attw reads the same tarball the fixtures install.
    { name: 'attw', binary: 'attw', args: [tarball.file, '--no-color'] },
  ];
  for (const tool of tools) {
    const path = join(REPO, 'node_modules', '.bin', tool.binary);
    if (!existsSync(path)) {
      results.push({ name: tool.name, skipped: `${tool.binary} is not installed in the repository (add it to devDependencies)` });
      continue;
    }
    const started = Date.now();
    const result = await run(path, tool.args, { cwd: REPO, env });
    results.push({ name: tool.name, ok: result.code === 0, ms: Date.now() - started, output: result.output });
  }
  return results;
}

// ---- main ----------------------------------------------------------------------------------

async function main() {
  const started = Date.now();
  const only = args.only?.split(',').map((name) => name.trim());
  const unknown = only?.filter((name) => !FIXTURES.some((fixture) => fixture.name === name)) ?? [];
  if (unknown.length) throw new Error(`no fixture named ${unknown.join(', ')} (have: ${FIXTURES.map((f) => f.name).join(', ')})`);
  const fixtures = FIXTURES.filter((fixture) => !only || only.includes(fixture.name));

  const workDir = mkdtempSync(join(tmpdir(), 'redlock-compat-'));
  dirs.add(workDir);
  if (args.keep) console.log(`work dir (kept): ${workDir}`);

  const tarball = await pack(workDir);
  console.log(`tarball: ${basename(tarball.file)}, ${kib(tarball.size)} packed, ${kib(tarball.unpacked)} unpacked, ${tarball.files.length} files`);

  // The runner's own environment minus what `npm run` adds for this repository: a fixture's npm
  // must see its own package, not ours.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_(package|lifecycle)_/i.test(key) && key !== 'INIT_CWD'));

  const outcomes = [];
  const tarballCheck = checkTarball(tarball);
  outcomes.push({ name: 'tarball', ok: tarballCheck.problems.length === 0, detail: tarballCheck.summary, output: tarballCheck.problems.join('\n') });
  for (const lint of await lintTools(tarball, env)) outcomes.push(lint);

  const binary = findRedisServer();
  const masters = await Promise.all(Array.from({ length: MASTERS }, (_, i) => startMaster(binary, workDir, i)));
  // NO_COLOR: the output tails quoted on failure are read in CI logs, not in a terminal.
  const fixtureEnv = { ...env, REDLOCK_NODES: masters.map((m) => m.url).join(','), CI: env.CI ?? 'true', NO_COLOR: '1' };
  console.log(`masters: ${masters.map((m) => m.url).join(' ')}`);

  const jobs = Math.max(1, Number(args.jobs) || 1);
  const results = await pool(
    fixtures.map((fixture) => async () => {
      const result = await runFixture(fixture, { workDir, tarball, env: fixtureEnv });
      report(result); // as each finishes, so a long run shows progress
      return result;
    }),
    jobs,
  );
  await Promise.all(
    masters.map((master) => {
      const gone = new Promise((resolveExit) => master.child.once('exit', resolveExit));
      master.child.kill('SIGKILL');
      return master.child.exitCode === null && master.child.signalCode === null ? gone : undefined;
    }),
  );

  console.log('');
  for (const outcome of outcomes) report(outcome);
  outcomes.push(...results);

  const passed = outcomes.filter((o) => o.ok === true).length;
  const failed = outcomes.filter((o) => o.ok === false).length;
  const skipped = outcomes.filter((o) => o.skipped).length;
  console.log(`\ncompat suite: ${seconds(Date.now() - started)}, tarball ${kib(tarball.size)}`);
  console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  return failed === 0;
}

function report(outcome) {
  if (outcome.skipped) {
    console.log(`SKIP ${outcome.name}: ${outcome.skipped}`);
    return;
  }
  const time = outcome.ms !== undefined ? ` (${seconds(outcome.ms)})` : '';
  const detail = outcome.detail ? `: ${outcome.detail}` : outcome.done ? `: ${outcome.done.join(', ')}` : '';
  console.log(`${outcome.ok ? 'PASS' : 'FAIL'} ${outcome.name}${time}${detail}`);
  if (!outcome.ok && outcome.failure) console.log(`  failed at: ${outcome.failure}`);
  const shown = outcome.ok ? (outcome.name === 'publint' || outcome.name === 'attw' ? outcome.output : '') : outcome.output;
  if (shown?.trim()) console.log(tail(shown).replace(/^/gm, '  | '));
}

main().then(
  (ok) => process.exit(ok ? 0 : 1),
  (error) => {
    console.error(`compat suite could not run: ${error.stack ?? error}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
