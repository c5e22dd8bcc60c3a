// Module hooks for register.mjs. Plain JS on purpose: they load before any TypeScript.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'rolldown/utils';

const OPTIONS = {
  sourceType: 'module',
  lang: 'ts',
  decorator: { legacy: true, emitDecoratorMetadata: true },
  typescript: {},
  helpers: { mode: 'External' },
  sourcemap: true,
};

/** nodenext style: `./x.js` in a .ts file names `./x.ts` when no x.js exists. */
export async function resolve(specifier, context, nextResolve) {
  const fromTs = context.parentURL?.endsWith('.ts') && /^[./]/.test(specifier) && specifier.endsWith('.js');
  if (fromTs) {
    const tsUrl = new URL(specifier.slice(0, -3) + '.ts', context.parentURL);
    if (!existsSync(new URL(specifier, context.parentURL)) && existsSync(tsUrl)) {
      return { url: tsUrl.href, shortCircuit: true };
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context);
  const filename = fileURLToPath(url);
  const { code, map, errors } = transformSync(filename, readFileSync(filename, 'utf8'), OPTIONS);
  if (errors.length > 0) throw new Error(`${filename}: ${errors.map((e) => e.message).join('; ')}`);
  const inlineMap = map ? `\n//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}` : '';
  return { format: 'module', source: code + inlineMap, shortCircuit: true };
}
