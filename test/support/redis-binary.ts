import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

const INSTALL_HINT =
  'redis-server not found: install it with `sudo apt-get install -y redis-server` or set REDIS_SERVER_BIN';

/** True when `file` is a regular file this process may execute. */
function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Absolute path of the `redis-server` binary the test fleets spawn.
 *
 * `REDIS_SERVER_BIN` wins (lets CI pin a specific build); otherwise PATH is searched
 * directory by directory, the way execvp would, but without spawning a shell
 * (`which` is not guaranteed to exist and a shell adds quoting hazards).
 */
export function findRedisServer(): string {
  const fromEnv = process.env['REDIS_SERVER_BIN'];
  if (fromEnv !== undefined && fromEnv !== '') {
    const candidate = resolve(fromEnv);
    if (isExecutableFile(candidate)) return candidate;
    throw new Error(`REDIS_SERVER_BIN=${fromEnv} is not an executable file. ${INSTALL_HINT}`);
  }
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    // Empty / relative PATH entries mean "current directory" to execvp; skip them so a
    // stray ./redis-server in the repo can never be picked up by accident.
    if (dir === '' || !isAbsolute(dir)) continue;
    const candidate = join(dir, 'redis-server');
    if (isExecutableFile(candidate)) return candidate;
  }
  throw new Error(INSTALL_HINT);
}
