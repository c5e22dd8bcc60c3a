import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { findRedisServer } from '../../test/support/redis-binary.js';

const ROOT = new URL('../../', import.meta.url);

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  redis: string;
}

export function describeMachine(): Machine {
  const redis = execFileSync(findRedisServer(), ['--version'], { encoding: 'utf8' });
  return {
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${process.platform} ${release()}`,
    node: process.version,
    redis: /v=(\S+)/.exec(redis)?.[1] ?? redis.trim(),
  };
}

/** The installed version, from the package's own package.json (not every package exports it). */
export function installedVersion(packageName: string): string {
  const path = packageName === 'nestjs-redlock' ? 'package.json' : `node_modules/${packageName}/package.json`;
  const pkg = JSON.parse(readFileSync(new URL(path, ROOT), 'utf8')) as { version: string };
  return pkg.version.replace(/^v/, '');
}

/**
 * Which engine was measured: each measurement loads lib/ afresh, so an edit during the run would
 * mix versions. A digest of lib/ at the start and the end of the run shows whether that happened.
 */
export interface EngineSource {
  /** Hash of every lib/ source file: what decides whether the measured code changed. */
  readonly digest: string;
  readonly label: string;
}

export function engineSource(): EngineSource {
  const lib = new URL('lib/', ROOT);
  const files = (readdirSync(lib, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).sort();
  const hash = createHash('sha256');
  for (const file of files) hash.update(file).update(readFileSync(new URL(file, lib)));
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  let commit = 'no git';
  try {
    commit = git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain', '--', 'lib') ? ' + uncommitted lib/ changes' : '');
  } catch {
    /* not a git checkout */
  }
  const digest = hash.digest('hex').slice(0, 12);
  return { digest, label: `lib/ digest ${digest} (commit ${commit})` };
}
