import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

/**
 * Process-wide cleanup for test fleets: whatever a test does (throws, forgets
 * stopAll, gets SIGTERM from the runner), no redis-server may outlive this process
 * and no temp dir may stay behind.
 *
 * The registry hangs off globalThis so that a module evaluated several times in one
 * process (test isolation) installs the process hooks once and shares one set.
 * A SIGKILL of this process itself cannot be intercepted; children spawned
 * non-detached still share our process group, so a terminal Ctrl-C reaches them.
 */
export interface CleanupRegistry {
  /** Live redis-server children; a child removes itself when it exits. */
  readonly children: Set<ChildProcess>;
  /** Temp dirs still to delete. */
  readonly dirs: Set<string>;
  /** Fleets not yet stopped, for stopAllFleets(). */
  readonly fleets: Set<{ stopAll(): Promise<void> }>;
}

/** Synchronous on purpose: an 'exit' listener cannot await anything. */
function killEverythingSync(this: void): void {
  // SIGKILL is delivered even to SIGSTOPped processes, so no SIGCONT is needed.
  for (const child of registry.children) child.kill('SIGKILL');
  for (const dir of registry.dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* best effort: a dying redis may still be writing its log */
    }
  }
}

function onFatalSignal(signal: NodeJS.Signals): void {
  killEverythingSync();
  // Having a listener disables Node's default "die on signal". If nobody else
  // handles it, re-raise so the process still dies with the expected signal.
  process.removeListener(signal, onFatalSignal);
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

const REGISTRY_KEY = Symbol.for('nestjs-redlock/test/process-cleanup');

export const registry: CleanupRegistry = ((globalThis as Record<symbol, CleanupRegistry | undefined>)[
  REGISTRY_KEY
] ??= (() => {
  process.on('exit', killEverythingSync);
  process.on('SIGINT', onFatalSignal);
  process.on('SIGTERM', onFatalSignal);
  return { children: new Set(), dirs: new Set(), fleets: new Set() };
})());
