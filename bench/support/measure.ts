import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { ChildJob } from '../child.js';
import type { Figures } from '../scenarios/scenario.js';
import { nextMessage } from './ipc.js';

const CHILD = fileURLToPath(new URL('../child.ts', import.meta.url));
/** A run that hangs (a library that never returns) must not hang the benchmark. */
const CHILD_TIMEOUT_MS = 10 * 60_000;

/**
 * nestjs-redlock ignores the votes of a master that started less than its longest ttl ago (a
 * restarted master has forgotten live locks). Production masters are not minutes old; a bench's
 * are, so a run waits out the 10 s ttl the scenarios use before measuring anything.
 */
export const FLEET_SETTLE_MS = 11_000;

/** One measurement in a fresh Node process (bench/child.ts), so no run inherits another's heap or JIT state. */
export function measureInChild(job: ChildJob): Promise<Figures> {
  return runInChild<Figures>(CHILD, job);
}

/** Runs `script` in a fresh Node process with `job` as its argument; resolves with what it reports. */
export async function runInChild<T>(script: string, job: unknown): Promise<T> {
  const child = fork(script, [JSON.stringify(job)], { execArgv: [...process.execArgv, '--expose-gc'] });
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  try {
    return await nextMessage<T>(child, 'the measuring process');
  } finally {
    // The next measurement must not overlap this one's last moments.
    if (child.exitCode === null && child.signalCode === null) await once(child, 'close');
    clearTimeout(timer);
  }
}
