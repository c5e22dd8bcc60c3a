import type { ChildProcess } from 'node:child_process';

/**
 * Every process the demo (or a test using its launchers) starts. If this process exits without
 * having stopped them, for whatever reason short of SIGKILL, they are killed on the way out:
 * a demo must never leave a redis-server or a replica behind. Children are spawned in our
 * process group, so a Ctrl-C in the terminal reaches them too.
 */
const live = new Set<ChildProcess>();

export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.once('error', () => live.delete(child));
}

/** Synchronous on purpose: an 'exit' listener cannot wait for anything. */
export function killAllSync(): void {
  for (const child of live) child.kill('SIGKILL');
}

process.on('exit', killAllSync);

/** Resolves once `child` has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
}
