import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

// The entry point's types against code written for node-redlock's: node-redlock's own test files,
// untouched (vendor/original), type-checked with the project's TypeScript against
// lib/node-redlock. They were written for ioredis 4; under ioredis 6 the lines that construct a
// client or ask CLUSTER INFO do not type-check whichever Redlock they use. Every other line (every
// use of Redlock, Lock, ExecutionError, ResourceLockedError, their settings and results) must.

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const ORIGINALS = join(ROOT, 'test/node-redlock/vendor/original');
const FILES = ['single.test.ts', 'multi.test.ts'];
/** Lines that use ioredis 4's API (a default-import constructor, `cluster("info")`), and nothing of Redlock. */
const IOREDIS_ONLY = /new Redis\(|\.cluster\(\s*"info"\s*\)/;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Type-checks the originals against `index.ts`; returns each error as `file:line: message`. */
async function typeCheck(index: string): Promise<{ errors: string[]; sources: Map<string, string[]> }> {
  const dir = mkdtempSync(join(tmpdir(), 'node-redlock-types-'));
  dirs.push(dir);
  const sources = new Map<string, string[]>();
  for (const file of FILES) {
    const text = readFileSync(join(ORIGINALS, `${file}.orig`), 'utf8');
    writeFileSync(join(dir, file), text);
    sources.set(file, text.split('\n'));
  }
  writeFileSync(join(dir, 'index.ts'), index);
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const compilerOptions = { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'] };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: FILES }));
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  const output = await promisify(execFile)(tsc, ['-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string }) => error.stdout ?? String(error),
  );
  const errors = [...output.matchAll(/^([\w.-]+)\((\d+),\d+\): error (TS\d+: .*)$/gm)].map(([, file, line, message]) => `${file}:${line}: ${message}`);
  return { errors, sources };
}

function lineOf(error: string, sources: Map<string, string[]>): string {
  const [file, line] = error.split(':') as [string, string];
  return sources.get(file)?.[Number(line) - 1] ?? '';
}

it("node-redlock's own test files type-check against nestjs-redlock/node-redlock, but for their ioredis 4 lines", async () => {
  const entry = join(ROOT, 'lib/node-redlock/index.js');
  const { errors, sources } = await typeCheck(`export { default, ExecutionError, ResourceLockedError } from ${JSON.stringify(entry)};\n`);
  const others = errors.filter((error) => !IOREDIS_ONLY.test(lineOf(error, sources)));
  expect(others).toEqual([]);
  // The ioredis lines are there, and fail: the check reads tsc's errors at all.
  expect(errors.length).toBeGreaterThan(0);
}, 120_000);

it('the same check fails for a Redlock that lacks what node-redlock users call', async () => {
  const { errors, sources } = await typeCheck(
    'export default class Redlock { constructor(_clients: unknown[], _settings?: object) {} acquire(_r: string[], _d: number): Promise<{ value: string }> { return Promise.reject(new Error()); } }\n' +
      'export class ExecutionError extends Error { attempts: Promise<unknown>[] = []; }\n' +
      'export class ResourceLockedError extends Error {}\n',
  );
  const others = errors.filter((error) => !IOREDIS_ONLY.test(lineOf(error, sources)));
  expect(others.some((error) => /using|extend|release|attempts|votesAgainst/.test(error))).toBe(true);
}, 120_000);
