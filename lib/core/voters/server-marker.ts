import { newToken } from '../base/token.js';
import { script } from '../scripts/lua-script.js';
import { runScript, type MasterClient } from './clients/master-client.js';

/**
 * The marker of `identifyBy: 'marker'` (IdentifyBy, lock/redlock-options.ts): one key per master,
 * the bare `fenceKeyPrefix` (no resource is empty, so no resource's key is it), holding a random id
 * and, on the master's own clock, when it was written. A master that lost its keys (restarted
 * without persistence, a new empty server at the address, FLUSHALL) lost the marker too: it is
 * written again, and the master counts as up since then. What it cannot see: a restart that
 * reloads an older snapshot or a shorter AOF (the marker comes back, some locks do not), and a
 * replica promoted in a failover (the marker was replicated there).
 */

/** What a master's marker says: which data set it is, and how old that data set is. */
export interface ServerMarker {
  readonly id: string;
  /** How long ago the marker was written, on the master's clock (0 when written just now). */
  readonly ageMs: number;
}

/**
 * KEYS[1] the marker key. ARGV[1] a new random id. Writes `id createdAt` (the master's clock, ms)
 * if the key is absent, without expiry. Returns {id, createdAt, now}.
 */
const MARKER_SCRIPT = script(
  'server-marker',
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value = redis.call('GET', KEYS[1])
if not value then
  value = ARGV[1] .. ' ' .. now
  redis.call('SET', KEYS[1], value)
end
local id, created = string.match(value, '^(%S+) (%d+)$')
if not id then return redis.error_reply('the key ' .. KEYS[1] .. ' is not a marker of nestjs-redlock') end
return {id, created, tostring(now)}`,
);

/** Reads `client`'s marker, writing it first where the master has none. */
export async function readMarker(client: MasterClient, key: string): Promise<ServerMarker> {
  const reply = await runScript(client, MARKER_SCRIPT.sha, MARKER_SCRIPT.source, 1, [key, newToken()]);
  const [id, created, now] = Array.isArray(reply) ? (reply as unknown[]) : [];
  const age = Number(now) - Number(created);
  if (typeof id !== 'string' || !Number.isFinite(age)) throw new Error('the server marker script gave a reply it cannot give');
  // The age is read on the master's wall clock, as INFO's uptime is not: a clock stepped back
  // makes the data set look younger (a longer quarantine), one stepped forward older.
  return { id, ageMs: Math.max(0, age) };
}
