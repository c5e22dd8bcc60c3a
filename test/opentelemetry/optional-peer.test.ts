import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// @opentelemetry/api is an optional peer: only the nestjs-redlock/opentelemetry entry may reach
// it. Everything the root entry and /core import, followed file by file through lib/, must
// name no @opentelemetry package (the compatibility suite loads both from the packed tarball
// in apps that do not have it installed).

const LIB = resolve(dirname(fileURLToPath(import.meta.url)), '../../lib');
const SPECIFIER = /(?:^|[\s;])(?:import|export)\s[^'"]*?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** Every package an entry reaches through lib/, with the file that names it. */
function packagesReachedFrom(entry: string): Map<string, string> {
  const packages = new Map<string, string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const match of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      const specifier = (match[1] ?? match[2])!;
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else if (!packages.has(specifier)) packages.set(specifier, file);
    }
  };
  visit(resolve(LIB, entry));
  return packages;
}

const openTelemetry = (packages: Map<string, string>) => [...packages].filter(([name]) => name.startsWith('@opentelemetry/'));

describe('@opentelemetry/api stays optional', () => {
  it('the root entry and nestjs-redlock/core import nothing of OpenTelemetry', () => {
    for (const entry of ['index.ts', 'core/index.ts']) {
      const packages = packagesReachedFrom(entry);
      expect(packages.has('ioredis')).toBe(true); // the walk does reach the engine's imports
      expect(openTelemetry(packages)).toEqual([]);
    }
  });

  it('nestjs-redlock/opentelemetry imports @opentelemetry/api, and no SDK or exporter', () => {
    const packages = openTelemetry(packagesReachedFrom('opentelemetry/index.ts')).map(([name]) => name);
    expect(packages).toEqual(['@opentelemetry/api']);
  });
});
