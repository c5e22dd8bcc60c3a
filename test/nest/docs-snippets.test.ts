import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

// Every ```ts block of README.md and docs/*.md, type-checked as written against this checkout's
// lib/, with the project's TypeScript, and nothing added: a block compiles only if it defines or
// imports every name it uses, as a reader pasting it would need.
//
// A block whose first line is a file comment (`// src/orders.service.ts`) is written at that path,
// so other blocks import it as a reader's app would (`import { OrdersService } from
// './orders.service'`); the others are written under src/ with a name of their own. The README's
// quick start is the app the guides build on: each guide is compiled in a folder of its own,
// over the README's named files (a guide's file of the same name replaces the README's).
// Test blocks use the test runner's globals (describe, it, expect), as a `nest new` app's Jest
// does: Vitest's global types stand for them here.
// readme-examples.test.ts runs the quick start against real masters, and test/compat/nest11-readme
// builds it from these blocks as a Nest 11 CommonJS app under Jest.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const README = 'README.md';
const GUIDES = readdirSync(join(ROOT, 'docs'))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);

interface Snippet {
  readonly line: number;
  readonly code: string;
  /** The path its file comment names, if any. */
  readonly path: string | undefined;
}

function snippets(markdown: string): Snippet[] {
  const found: Snippet[] = [];
  const fence = /^```ts\n([\s\S]*?)^```$/gm;
  for (let match = fence.exec(markdown); match; match = fence.exec(markdown)) {
    const code = match[1]!;
    const path = /^\/\/ ((?:src|test)\/[\w./-]+\.ts)\n/.exec(code)?.[1];
    found.push({ line: markdown.slice(0, match.index).split('\n').length, code, path });
  }
  return found;
}

/** Where each block of one markdown file goes: its named path, or a path of its own under src/. */
function files(markdownPath: string): Map<string, string> {
  const out = new Map<string, string>();
  const slug = markdownPath.replace(/\W+/g, '-');
  for (const snippet of snippets(readFileSync(join(ROOT, markdownPath), 'utf8'))) {
    const path = snippet.path ?? `src/${slug}-line-${snippet.line}.ts`;
    if (out.has(path)) throw new Error(`${markdownPath} line ${snippet.line}: a second block names ${path}`);
    out.set(path, `// ${markdownPath} line ${snippet.line}\n${snippet.code}`);
  }
  return out;
}

let dir: string | undefined;
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('every TypeScript block of the README and the guides compiles against lib/, complete as written', async () => {
  const readme = files(README);
  expect(readme.size).toBeGreaterThan(3);
  const quickStart = new Map([...readme].filter(([path]) => !path.includes('-line-')));
  // Inside the repository, so that packages resolve from its node_modules.
  mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
  dir = mkdtempSync(join(ROOT, 'node_modules/.cache/docs-snippets-'));
  const groups = new Map<string, Map<string, string>>([['readme', readme]]);
  for (const guide of GUIDES) groups.set(guide.replace(/\W+/g, '-'), new Map([...quickStart, ...files(guide)]));
  let blocks = 0;
  for (const [group, contents] of groups) {
    for (const [path, code] of contents) {
      mkdirSync(dirname(join(dir, group, path)), { recursive: true });
      writeFileSync(join(dir, group, path), code);
    }
    blocks += contents.size;
  }
  expect(blocks).toBeGreaterThan(20);
  writeFileSync(join(dir, 'test-globals.d.ts'), `/// <reference path="${join(ROOT, 'node_modules/vitest/globals.d.ts')}" />\n`);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        lib: ['es2023'],
        module: 'esnext',
        moduleResolution: 'bundler',
        moduleDetection: 'force',
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules/@types')],
        strict: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        skipLibCheck: true,
        noEmit: true,
        paths: {
          'nestjs-redlock': [join(ROOT, 'lib/index.ts')],
          'nestjs-redlock/*': [join(ROOT, 'lib/*/index.ts')],
        },
      },
      include: ['**/*.ts'],
    }),
  );
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  const result = await promisify(execFile)(tsc, ['-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
    () => ({ ok: true, output: '' }),
    (error: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${error.stdout ?? ''}${error.stderr ?? ''}` }),
  );
  expect(result.output).toBe('');
  expect(result.ok).toBe(true);
}, 180_000);

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const outsideCode = markdown.replace(/^```[\s\S]*?^```$/gm, '');
  return new Set([...outsideCode.matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchor(match[1]!)));
}

it('every relative link of the README and the guides leads to a file, and to a heading of it', () => {
  const broken: string[] = [];
  for (const from of [README, ...GUIDES, 'sample-app/README.md']) {
    const markdown = readFileSync(join(ROOT, from), 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
    for (const [, target] of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue;
      const [file, hash] = target!.split('#') as [string, string | undefined];
      const path = file === '' ? join(ROOT, from) : resolve(join(ROOT, dirname(from)), file);
      if (!existsSync(path)) broken.push(`${from}: ${target} (no such file)`);
      else if (hash !== undefined && path.endsWith('.md') && !anchorsOf(readFileSync(path, 'utf8')).has(hash)) {
        broken.push(`${from}: ${target} (no such heading)`);
      }
    }
  }
  expect(broken).toEqual([]);
});

/** The blocks readme-app.ts and readme-examples.test.ts run, between their markers, by markdown file and path. */
function runCopies(): { from: string; path: string; code: string }[] {
  const copies: { from: string; path: string; code: string }[] = [];
  for (const file of ['test/nest/readme-app.ts', 'test/nest/readme-examples.test.ts']) {
    const source = readFileSync(join(ROOT, file), 'utf8');
    const marked = /^\/\/ ---- (README|docs\/[\w.-]+): (\S+) -+\n([\s\S]*?)^\/\/ ---- end/gm;
    for (const [, from, path, code] of source.matchAll(marked)) {
      copies.push({ from: from === 'README' ? README : from!, path: path!, code: code! });
    }
  }
  return copies;
}

it('the code that readme-examples.test.ts runs is the code the markdown shows', () => {
  const copies = runCopies();
  expect(copies.length).toBeGreaterThanOrEqual(6);
  const withoutImports = (code: string) =>
    code
      .split('\n')
      .filter((line) => !line.startsWith('import ') && !/^\/\/ (src|test)\//.test(line))
      .join('\n')
      .trim();
  for (const { from, path, code } of copies) {
    const shown = snippets(readFileSync(join(ROOT, from), 'utf8')).find((snippet) => snippet.path === path);
    expect(shown, `${from} has a block for ${path}`).toBeDefined();
    expect(withoutImports(code), `${path} as run, against ${from}`).toBe(withoutImports(shown!.code));
  }
});
