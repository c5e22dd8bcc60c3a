// Every entry point names its exports (no `export *`, so nothing becomes public by being added to
// a file), and each ESM shim (lib/**/index.mts, which re-exports the CommonJS build so that import
// and require give one copy of each class) names exactly what its index.ts exports: a name left
// out of a shim would be missing under `import`, one too many would fail to link.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as {
  exports: Record<string, string | { require: { default: string } }>;
};

/** `.` → lib/index, `./core` → lib/core/index, from the CommonJS file each export maps to. */
const entries = Object.entries(pkg.exports)
  .filter(([subpath]) => subpath !== './package.json')
  .map(([subpath, target]) => {
    const built = typeof target === 'string' ? target : target.require.default;
    return { subpath, source: built.replace(/^\.\/dist\//, 'lib/').replace(/\.js$/, '') };
  });

interface Names {
  values: string[];
  types: string[];
}

/** The names an entry file re-exports. Entry files only re-export, so the statements are simple. */
function exportedNames(file: string): Names {
  const text = readFileSync(`${ROOT}${file}`, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '');
  const values: string[] = [];
  const types: string[] = [];
  for (const [, typeOnly, list] of text.matchAll(/export\s+(type\s+)?\{([^}]*)\}\s*from/g)) {
    for (const item of list.split(',').map((part) => part.trim()).filter(Boolean)) {
      const isType = Boolean(typeOnly) || item.startsWith('type ');
      const name = item.replace(/^type\s+/, '').split(/\s+as\s+/).at(-1)!;
      (isType ? types : values).push(name);
    }
  }
  return { values: values.sort(), types: types.sort() };
}

describe.each(entries)('entry point $subpath', ({ source }) => {
  it('names every export', () => {
    for (const file of [`${source}.ts`, `${source}.mts`]) {
      const text = readFileSync(`${ROOT}${file}`, 'utf8');
      expect(text, file).not.toMatch(/export\s+(type\s+)?\*/);
      // Anything but re-exports would escape the comparison below.
      expect(text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, ''), file).not.toMatch(
        /export\s+(?!(type\s+)?\{)/,
      );
    }
  });

  it('has an ESM shim exporting the same names', () => {
    const cjs = exportedNames(`${source}.ts`);
    expect(cjs.values.length + cjs.types.length).toBeGreaterThan(0);
    expect(exportedNames(`${source}.mts`)).toEqual(cjs);
  });

  it('exports at run time exactly the names it lists as values', async () => {
    const loaded = (await import(`${ROOT}${source}.ts`)) as Record<string, unknown>;
    expect(Object.keys(loaded).sort()).toEqual(exportedNames(`${source}.ts`).values);
  });
});
