import type { Redis } from 'ioredis';
import type { MasterAddress } from '../lock/instrumentation.js';
import { endpointName } from '../base/redact.js';
import { isSentinelManaged, sentinelAddress, sentinelKeys, type SentinelAddressOptions } from './sentinel-voter.js';

/**
 * How a voter is named in errors, logs, health and telemetry: by host and port only (a socket
 * path, a Sentinel group), whatever form its address was given in. Credentials can sit in the
 * options, in a URL's user info or in its query (`?password=`); none of them is ever read here.
 */

interface AddressOptions extends SentinelAddressOptions {
  host?: string;
  port?: number;
  path?: string;
}

export function addressOptions(client: Redis): AddressOptions {
  return (client as unknown as { options?: AddressOptions }).options ?? {};
}

export function nodeName(client: Redis): string {
  return masterAddress(client).name;
}

/** The master's name, and its host and port apart (telemetry's `server.address`, `server.port`). */
export function masterAddress(client: Redis): MasterAddress {
  const cluster = clusterAddress(client);
  if (cluster) return cluster;
  const options = addressOptions(client);
  if (isSentinelManaged(options)) return sentinelAddress(options);
  if (options.path) return { name: options.path, address: options.path, port: undefined };
  const host = options.host ?? 'localhost';
  const port = options.port ?? 6379;
  return { name: endpointName(host, port), address: host, port };
}

/** A Redis Cluster client is one voter, named after the first node it was given to find the cluster. */
function clusterAddress(client: Redis): MasterAddress | undefined {
  const cluster = client as unknown as { isCluster?: boolean; startupNodes?: unknown };
  if (cluster.isCluster !== true) return undefined;
  const first = Array.isArray(cluster.startupNodes) ? (cluster.startupNodes[0] as unknown) : undefined;
  const node = startupNode(first);
  if (!node) return { name: 'cluster:(unreadable startup node)', address: 'unknown', port: undefined };
  if ('path' in node) return { name: `cluster:${node.path}`, address: node.path, port: undefined };
  return { name: `cluster:${endpointName(node.host, node.port)}`, address: node.host, port: node.port };
}

/**
 * Where a Cluster startup node points, read as ioredis reads it (a port, a URL with or without
 * its scheme, an object), keeping nothing else: a URL may carry a password in its user info or
 * its query. Undefined when ioredis could not read it either.
 */
function startupNode(node: unknown): { host: string; port: number } | { path: string } | undefined {
  // ioredis's defaults for a startup node (not a plain client's 'localhost').
  const host = (given: unknown) => (typeof given === 'string' && given !== '' ? given : '127.0.0.1');
  const port = (given: unknown) => Number.parseInt(String(given ?? ''), 10) || 6379;
  if (typeof node === 'number') return { host: host(undefined), port: port(node) };
  if (node !== null && typeof node === 'object') {
    const { host: h, port: p } = node as { host?: unknown; port?: unknown };
    return { host: host(h), port: port(p) };
  }
  if (typeof node !== 'string') return undefined;
  if (/^\d+$/.test(node)) return { host: host(undefined), port: port(node) };
  if (node.startsWith('/') && !node.startsWith('//')) return { path: node.replace(/\?.*$/s, '') };
  let url: URL;
  try {
    url = new URL(/^rediss?:\/\//i.test(node) ? node : node.startsWith('//') ? `redis:${node}` : `redis://${node}`);
  } catch {
    return undefined;
  }
  // As ioredis does: a query's host and port only fill in what the URL itself does not say.
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return { host: host(hostname || url.searchParams.get('host')), port: port(url.port || url.searchParams.get('port')) };
}

/** The names that mean one master, for refusing it twice: its address, or each of its sentinels. */
export function voterKeys(client: Redis): string[] {
  const options = addressOptions(client);
  return isSentinelManaged(options) ? sentinelKeys(options) : [masterAddress(client).name];
}
