import { PermissionDeniedError, type DeniedCommands } from '../base/errors.js';
import { WAKE_CHANNEL_PREFIX, type ResolvedRedlockOptions } from '../lock/redlock-options.js';
import type { RedisNode } from './redis-node.js';
import { within } from '../base/within.js';
import type { MasterClient } from './clients/master-client.js';

/** Whether a master's user may run what the engine sends it: each command tried in a way that changes nothing. */
export interface Permissions {
  /** False when the master could not be asked (unreachable). */
  readonly checked: boolean;
  /** What the user may not run, by command and, for scripts, by key prefix. */
  readonly denied: readonly string[];
}

/**
 * What the engine's scripts run, each tried on one probe key (left as it was: what is written is
 * deleted in the same call); the names refused come back (Redis 7 answers a script's refused
 * command with "ERR The user executing the script can't run this command", later ones NOPERM). A script runs its commands
 * with the calling user's rights, so a user allowed EVAL may still be refused inside it.
 */
const SCRIPT_COMMANDS = `local refused = {}
local function try(name, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err and (string.find(reply.err, 'NOPERM', 1, true) or string.find(reply.err, "can't run this command", 1, true)) then
    refused[#refused + 1] = name
  end
end
local k = KEYS[1]
try('GET', 'GET', k)
try('EXISTS', 'EXISTS', k)
try('PTTL', 'PTTL', k)
try('TIME', 'TIME')
try('HGET', 'HGET', k, 'f')
try('HGETALL', 'HGETALL', k)
try('SET', 'SET', k, '1', 'PX', 1000)
try('PEXPIRE', 'PEXPIRE', k, 1000)
try('DEL', 'DEL', k)
try('INCR', 'INCR', k)
redis.pcall('DEL', k)
try('HSET', 'HSET', k, 'f', '1')
try('HDEL', 'HDEL', k, 'f')
redis.pcall('DEL', k)
return refused`;

/** A reply of NOPERM (ACL) is a denial; anything else (NOSCRIPT, a wrong-type error) means the command ran. */
const denied = (error: unknown) => error instanceof Error && /^NOPERM\b/.test(error.message);

/**
 * Tries, on `client`, every command the engine needs, harmlessly: PING and (unless `identifyBy:
 * 'marker'`) INFO for identity, a
 * script that touches nothing but declares one key under each of the engine's prefixes (the
 * ACL checks declared keys), EVALSHA of an unknown script (NOSCRIPT when allowed), SCRIPT LOAD of
 * a one-line script, PUBLISH and SUBSCRIBE on a wake-up channel nobody listens to, and WAIT
 * (for `replicaAcks`).
 */
export async function probePermissions(client: MasterClient, options: ResolvedRedlockOptions): Promise<Permissions> {
  const missing: string[] = [];
  const attempt = async (label: string, run: () => Promise<unknown>) => {
    try {
      await run();
    } catch (error) {
      if (denied(error)) missing.push(label);
    }
  };
  await attempt('PING', () => client.ping());
  if (options.identifyBy === 'info') await attempt('INFO', () => client.info('server'));
  const prefixes = {
    keyPrefix: options.keyPrefix,
    queueKeyPrefix: options.queueKeyPrefix,
    fenceKeyPrefix: options.fenceKeyPrefix,
    holdersKeyPrefix: options.holdersKeyPrefix,
    leaderKeyPrefix: options.leaderKeyPrefix,
  };
  const inScripts = new Set<string>();
  for (const [name, prefix] of Object.entries(prefixes)) {
    await attempt(`EVAL on ${prefix}* (${name})`, async () => {
      const refused = (await client.eval(SCRIPT_COMMANDS, 1, [`${prefix}nestjs-redlock-permission-check`])) as string[];
      for (const command of refused) inScripts.add(`${command} (in scripts)`);
    });
  }
  missing.push(...inScripts);
  await attempt('EVALSHA', () => client.evalsha('0000000000000000000000000000000000000000', 0, []));
  await attempt('SCRIPT LOAD', () => client.command('SCRIPT', ['LOAD', 'return 1']));
  const channel = `${WAKE_CHANNEL_PREFIX}nestjs-redlock-permission-check`;
  await attempt(`PUBLISH on ${WAKE_CHANNEL_PREFIX}*`, () => client.publish(channel, ''));
  // A release publishes on the lock key's own name, which waiters of other processes listen to.
  await attempt(`PUBLISH on ${options.keyPrefix}*`, () => client.publish(`${options.keyPrefix}nestjs-redlock-permission-check`, ''));
  await attempt(`SUBSCRIBE on ${WAKE_CHANNEL_PREFIX}*`, () => client.trySubscribe(channel));
  await attempt('WAIT (replicaAcks)', () => client.wait(0, 1));
  return { checked: true, denied: missing };
}

/**
 * `redlock.verifyPermissions()`: every reachable master's user tried on every command the engine
 * needs (a master that does not answer is skipped: `checkMasters` reports it). Rejects with
 * PermissionDeniedError naming what each master's user may not run.
 */
export async function verifyPermissions(nodes: readonly RedisNode[], options: ResolvedRedlockOptions, timeoutMs: number): Promise<void> {
  const probes = await Promise.all(
    nodes.map(async (node): Promise<DeniedCommands | undefined> => {
      // A master that does not answer in time is checkMasters' to report, not a denial.
      const probed = await within(probePermissions(node.client, options), timeoutMs, () => undefined);
      return probed && probed.denied.length > 0 ? { node: node.name, commands: probed.denied } : undefined;
    }),
  );
  const denied = probes.filter((probe): probe is DeniedCommands => probe !== undefined);
  if (denied.length > 0) throw new PermissionDeniedError(denied);
}
