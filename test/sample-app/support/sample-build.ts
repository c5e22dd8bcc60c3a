import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const SAMPLE_MAIN = join(ROOT, 'sample-app/dist/src/main.js');
export const DEMO_MAIN = join(ROOT, 'sample-app/dist/demo/main.js');

const STAMP = join(ROOT, 'sample-app/dist/.built');
const SOURCES = ['sample-app/src', 'sample-app/demo', 'sample-app/tsconfig.json', 'dist/index.js'].map((path) => join(ROOT, path));
/** One lock per checkout: the test files that need the build run in parallel workers. */
const LOCK = join(tmpdir(), `nestjs-redlock-sample-build-${createHash('sha1').update(ROOT).digest('hex').slice(0, 12)}`);
const LOCK_STALE_MS = 5 * 60_000;

/**
 * Compiles the sample app and demo (sample-app/dist) unless they are newer than their sources,
 * building the library first if its dist/ is missing (the sample imports it by package name).
 * Test files run in parallel, so this holds a cross-process lock: one builds, the others wait
 * and then find the build fresh, rather than rewriting files another test is running.
 */
export async function ensureSampleBuilt(): Promise<void> {
  await acquireLock();
  try {
    if (!existsSync(join(ROOT, 'dist/index.js')) || !existsSync(join(ROOT, 'dist/index.d.ts'))) run(['run', 'build']);
    if (existsSync(STAMP) && statSync(STAMP).mtimeMs > Math.max(...SOURCES.map(newestMtime))) return;
    run(['exec', '--', 'tsc', '-p', 'sample-app/tsconfig.json']);
    writeFileSync(STAMP, new Date().toISOString());
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

function run(npmArgs: string[]): void {
  const result = spawnSync('npm', npmArgs, { cwd: ROOT, encoding: 'utf8', timeout: 150_000 });
  if (result.status !== 0) {
    throw new Error(`npm ${npmArgs.join(' ')} failed (${result.status ?? result.signal ?? result.error}):\n${result.stdout}${result.stderr}`);
  }
}

/** mkdir is atomic: whoever creates the directory holds the lock. */
async function acquireLock(): Promise<void> {
  for (;;) {
    try {
      mkdirSync(LOCK);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A holder that died (killed test run) never removes it.
      const held = statSync(LOCK, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > LOCK_STALE_MS) {
        rmSync(LOCK, { recursive: true, force: true });
      }
      await sleep(200);
    }
  }
}

function newestMtime(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newestMtime(join(path, name))));
}
