import type { MasterAddress } from './instrumentation.js';

/** The part of ioredis options that says a master is found through Sentinel. */
export interface SentinelAddressOptions {
  sentinels?: readonly { host?: string; port?: number }[] | null;
  name?: string | null;
  role?: string | null;
}

/** ioredis's default Sentinel port, used when a sentinel is given without one. */
const SENTINEL_PORT = 26379;

/** Whether ioredis finds this master through Sentinel (it then ignores host, port and path). */
export function isSentinelManaged(options: SentinelAddressOptions): boolean {
  return Array.isArray(options.sentinels) && options.sentinels.length > 0;
}

/**
 * A Sentinel-managed master as errors, logs and telemetry name it: `sentinel:<name>@<first
 * sentinel>`. It stays the same across failovers, while the server behind it changes (the
 * restart quarantine sees that by run_id), carries no credential (`sentinelPassword` and
 * `password` are never read), and tells apart two deployments that both call their master
 * `mymaster`.
 */
export function sentinelAddress(options: SentinelAddressOptions): MasterAddress {
  const group = options.name ?? 'mymaster';
  return { name: `sentinel:${group}@${endpoint(options.sentinels![0]!)}`, address: group, port: undefined };
}

/**
 * One name per sentinel listed (`sentinel:<name>@host:port`): two clients that share one is
 * the same master twice, since a Sentinel monitors one master under each name.
 */
export function sentinelKeys(options: SentinelAddressOptions): string[] {
  const group = options.name ?? 'mymaster';
  return (options.sentinels ?? []).map((sentinel) => `sentinel:${group}@${endpoint(sentinel)}`);
}

function endpoint({ host = 'localhost', port = SENTINEL_PORT }: { host?: string; port?: number }): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Why a Sentinel client cannot be a voter, or undefined when it can. */
export function sentinelVoterProblem(options: SentinelAddressOptions): string | undefined {
  if (options.role !== undefined && options.role !== null && options.role !== 'master') {
    return `role "${String(options.role)}" reaches a replica, which refuses writes; a voter must be its group's master (role "master", the default)`;
  }
  return undefined;
}
