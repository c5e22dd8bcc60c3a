// The ESM side under nodenext: this file resolves the "import" conditions (the .d.mts
// declarations), check.ts the "require" ones.
import { LockHeldError as RootLockHeldError, RedlockModule, RedlockService, WithLock, type RedlockModuleOptions } from 'nestjs-redlock';
import { Lock, LockHeldError, Redlock, type RedlockOptions } from 'nestjs-redlock/core';
import NodeRedlock, { Lock as NodeRedlockLock, Redlock as NamedNodeRedlock } from 'nestjs-redlock/node-redlock';
import type { Redis } from 'ioredis';

const options: RedlockModuleOptions = { nodes: ['redis://127.0.0.1:1'] };
// @ts-expect-error nodes is required
const missingNodes: RedlockModuleOptions = {};
const sameClass: typeof LockHeldError = RootLockHeldError;

export async function run(service: RedlockService, clients: Redis[], engineOptions: RedlockOptions): Promise<number> {
  const engine = new Redlock(clients, engineOptions);
  const lock: Lock = await engine.acquire('r', 1_000);
  await lock.release();
  return service.using('r', async (signal: AbortSignal) => (signal.aborted ? 0 : 1));
}

/** The default export and the named one are one class under the import conditions too. */
export async function hold(clients: Redis[]): Promise<number> {
  const Same: typeof NamedNodeRedlock = NodeRedlock;
  const lock: NodeRedlockLock = await new Same(clients).acquire(['r'], 1_000);
  await lock.release();
  return lock.expiration;
}

export { RedlockModule, WithLock, options, missingNodes, sameClass };
