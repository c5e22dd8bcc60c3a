import type { Redis } from 'ioredis';
import { WAKE_CHANNEL_PREFIX, type ResolvedRedlockOptions } from '../core/lock/redlock-options.js';

/** Whether a master's user may run what the engine sends it: each command tried in a way that changes nothing. */
export interface Permissions {
  /** False when the master could not be asked (unreachable). */
  readonly checked: boolean;
  /** What the user may not run, by command and, for scripts, by key prefix. */
  readonly denied: readonly string[];
}

/** A reply of NOPERM (ACL) is a denial; anything else (NOSCRIPT, a wrong-type error) means the command ran. */
const denied = (error: unknown) => error instanceof Error && /^NOPERM\b/.test(error.message);

/**
 * Tries, on `client`, every command the engine needs, harmlessly: PING and INFO (identity), a
 * script that touches nothing but declares one key under each of the engine's prefixes (the
 * ACL checks declared keys), EVALSHA of an unknown script (NOSCRIPT when allowed), SCRIPT LOAD of
 * a one-line script, PUBLISH and SUBSCRIBE on a wake-up channel nobody listens to, and WAIT
 * (for `replicaAcks`).
 */
export async function probePermissions(client: Redis, options: ResolvedRedlockOptions): Promise<Permissions> {
  const missing: string[] = [];
  const attempt = async (label: string, run: () => Promise<unknown>) => {
    try {
      await run();
    } catch (error) {
      if (denied(error)) missing.push(label);
    }
  };
  await attempt('PING', () => client.ping());
  await attempt('INFO', () => client.info('server'));
  const prefixes = {
    keyPrefix: options.keyPrefix,
    queueKeyPrefix: options.queueKeyPrefix,
    fenceKeyPrefix: options.fenceKeyPrefix,
    holdersKeyPrefix: options.holdersKeyPrefix,
    leaderKeyPrefix: options.leaderKeyPrefix,
  };
  for (const [name, prefix] of Object.entries(prefixes)) {
    await attempt(`EVAL on ${prefix}* (${name})`, () => client.eval('return 1', 1, `${prefix}nestjs-redlock-permission-check`));
  }
  await attempt('EVALSHA', () => client.evalsha('0000000000000000000000000000000000000000', 0));
  await attempt('SCRIPT LOAD', () => client.script('LOAD', 'return 1'));
  const channel = `${WAKE_CHANNEL_PREFIX}nestjs-redlock-permission-check`;
  await attempt(`PUBLISH on ${WAKE_CHANNEL_PREFIX}*`, () => client.publish(channel, ''));
  const subscriber = client.duplicate({ lazyConnect: true });
  subscriber.on('error', () => {});
  await attempt(`SUBSCRIBE on ${WAKE_CHANNEL_PREFIX}*`, async () => {
    await subscriber.connect();
    await subscriber.subscribe(channel);
    await subscriber.unsubscribe(channel);
  });
  subscriber.disconnect();
  await attempt('WAIT (replicaAcks)', () => client.wait(0, 1));
  return { checked: true, denied: missing };
}
