import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

// Every ```ts block of the README, type-checked as written against this checkout's lib/, with
// the project's TypeScript. A block may use what another block exports (the README builds one
// app across sections); names the README leaves to the reader's own code are declared below.
// readme-examples.test.ts runs the central examples against real masters; this keeps the rest
// from drifting out of date.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The reader's own code that snippets call without defining it. */
const READER_CODE = `
declare function chargeOrder(id: number, options: { signal: AbortSignal }): Promise<void>;
declare class OrdersService {
  pay(id: string): Promise<{ id: string; paid: boolean }>;
}
`;

interface Snippet {
  readonly line: number;
  readonly code: string;
}

function snippets(markdown: string): Snippet[] {
  const found: Snippet[] = [];
  const fence = /^```ts\n([\s\S]*?)^```$/gm;
  for (let match = fence.exec(markdown); match; match = fence.exec(markdown)) {
    found.push({ line: markdown.slice(0, match.index).split('\n').length, code: match[1]! });
  }
  return found;
}

const EXPORTED = /^export\s+(?:abstract\s+)?(?:class|function|const|interface|type|enum)\s+([A-Za-z_$][\w$]*)/gm;

function exportsOf(code: string): string[] {
  return [...code.matchAll(EXPORTED)].map((match) => match[1]!);
}

/** Imports, from the other snippets, of the names this one uses but neither declares nor imports. */
function crossImports(code: string, index: number, all: readonly Snippet[]): string {
  const lines: string[] = [];
  all.forEach((other, k) => {
    if (k === index) return;
    const used = exportsOf(other.code).filter((name) => new RegExp(`\\b${name}\\b`).test(code) && !declares(code, name));
    if (used.length) lines.push(`import { ${used.join(', ')} } from './snippet-${k + 1}.js';`);
  });
  return lines.join('\n');
}

function declares(code: string, name: string): boolean {
  const declared = new RegExp(`\\b(?:class|function|const|let|var|interface|type|enum)\\s+${name}\\b`);
  const imported = new RegExp(`\\bimport\\s+(?:type\\s+)?\\{[^}]*\\b${name}\\b[^}]*\\}`);
  return declared.test(code) || imported.test(code);
}

let dir: string | undefined;
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('every TypeScript snippet in the README compiles against lib/', async () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const all = snippets(readme);
  expect(all.length).toBeGreaterThan(3);
  // Inside the repository, so that packages resolve from its node_modules.
  mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
  dir = mkdtempSync(join(ROOT, 'node_modules/.cache/readme-snippets-'));
  all.forEach((snippet, index) => {
    const header = `// README.md line ${snippet.line}\n${crossImports(snippet.code, index, all)}\n`;
    writeFileSync(join(dir!, `snippet-${index + 1}.ts`), header + snippet.code);
  });
  writeFileSync(join(dir, 'reader-code.d.ts'), READER_CODE);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        lib: ['es2023'],
        module: 'esnext',
        moduleResolution: 'bundler',
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
      include: ['*.ts'],
    }),
  );
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  const result = await promisify(execFile)(tsc, ['-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
    () => ({ ok: true, output: '' }),
    (error: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${error.stdout ?? ''}${error.stderr ?? ''}` }),
  );
  expect(result.output).toBe('');
  expect(result.ok).toBe(true);
}, 120_000);
