import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';

/**
 * node-redlock's test files in vendor/ must stay node-redlock's: they may differ from the originals
 * (vendor/original/, themselves checked against the git blobs of tag v5.0.0-beta.2) only in the
 * connection-setup lines listed here and quoted in vendor/README.md, so nobody can quietly edit an
 * assertion to make our implementation pass.
 */

const VENDOR = new URL('./vendor/', import.meta.url);

/** git hash-object: the blob ids of the files at node-redlock's tag v5.0.0-beta.2. */
const TAG_BLOBS: Record<string, string> = {
  'original/single.test.ts.orig': '6a5990dade07d34e7c842203e1a4c1dc7f61d886',
  'original/multi.test.ts.orig': '5049b3e250d1339bbe79c70493ad95059df71085',
  LICENSE: '19f33f4c19ccccb8a3733b019b95fe60a6d9ad68',
};

/** Line number (1-based) → the vendored line, for every line that differs from the original. */
const CHANGED_LINES: Record<string, Record<number, string>> = {
  'single.test.ts': {
    205: '        host: "127.0.0.1", port: Number(process.env.NR_UNREACHABLE_PORT),',
    548: 'run("instance", new Redis({ host: "127.0.0.1", port: Number(process.env.NR_SINGLE_INSTANCE_PORT) }));',
    550: 'run("cluster", new Cluster([{ host: "127.0.0.1", port: Number(process.env.NR_SINGLE_CLUSTER_PORT) }]));',
  },
  'multi.test.ts': {
    319: '  new Redis({ host: "127.0.0.1", port: Number(process.env.NR_MULTI_INSTANCE_A_PORT) }),',
    320: '  new Redis({ host: "127.0.0.1", port: Number(process.env.NR_MULTI_INSTANCE_B_PORT) }),',
    321: '  new Redis({ host: "127.0.0.1", port: Number(process.env.NR_MULTI_INSTANCE_C_PORT) })',
    326: '  new Cluster([{ host: "127.0.0.1", port: Number(process.env.NR_MULTI_CLUSTER_A_PORT) }]),',
    327: '  new Cluster([{ host: "127.0.0.1", port: Number(process.env.NR_MULTI_CLUSTER_B_PORT) }]),',
    328: '  new Cluster([{ host: "127.0.0.1", port: Number(process.env.NR_MULTI_CLUSTER_C_PORT) }])',
  },
};

/** The original lines those replace: connection setup only (a hostname from docker-compose, or 127.0.0.1 without a port). */
const ORIGINAL_LINE = /^(\s*host: "127\.0\.0\.1",|run\("\w+", new (Redis|Cluster)\(\[?\{ host: "redis-[\w-]+" \}\]?\)\);|\s*new (Redis|Cluster)\(\[?\{ host: "redis-[\w-]+" \}\]?\),?)$/;

function read(name: string): Buffer {
  return readFileSync(new URL(name, VENDOR));
}

function gitBlobId(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

describe("node-redlock's vendored test files", () => {
  test.each(Object.entries(TAG_BLOBS))('%s is the file at tag v5.0.0-beta.2 (git blob %s)', (name, blob) => {
    expect(gitBlobId(read(name))).toBe(blob);
  });

  test.each(Object.keys(CHANGED_LINES))('%s differs from the original only in its connection setup', (name) => {
    const original = read(`original/${name}.orig`).toString('utf8').split('\n');
    const vendored = read(name).toString('utf8').split('\n');
    expect(vendored.length, 'the line count changed').toBe(original.length);
    const changed: Record<number, string> = {};
    vendored.forEach((line, index) => {
      if (line !== original[index]) changed[index + 1] = line;
    });
    expect(changed).toEqual(CHANGED_LINES[name]);
    for (const line of Object.keys(CHANGED_LINES[name]!).map(Number)) {
      expect(original[line - 1], `original line ${line}`).toMatch(ORIGINAL_LINE);
    }
  });

  test('vendor/README.md quotes every changed line, before and after', () => {
    const readme = read('README.md').toString('utf8');
    for (const [name, lines] of Object.entries(CHANGED_LINES)) {
      const original = read(`original/${name}.orig`).toString('utf8').split('\n');
      for (const [line, text] of Object.entries(lines)) {
        expect(readme, `${name}:${line} vendored`).toContain(text);
        expect(readme, `${name}:${line} original`).toContain(original[Number(line) - 1]!);
      }
    }
  });
});
