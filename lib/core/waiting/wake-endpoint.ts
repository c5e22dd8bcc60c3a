import { createConnection, type Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';
import type { Redis } from 'ioredis';
import { isSentinelManaged } from '../voters/sentinel-voter.js';

/** How to open one connection to a master: where, TLS or not, and what to authenticate with. */
export interface WakeEndpoint {
  /** Opens the socket; `ready` is the event after which it can carry commands. */
  open(): { socket: Socket; ready: 'connect' | 'secureConnect' };
  /** AUTH's arguments, or undefined when the master wants none. */
  readonly auth: readonly string[] | undefined;
  readonly connectTimeoutMs: number;
  readonly keepAliveMs: number;
  readonly noDelay: boolean;
}

/** The ioredis options a connection is made from (the client's, or a Cluster node's). */
interface ConnectionSettings {
  host?: string;
  port?: number;
  path?: string | null;
  family?: number;
  tls?: ConnectionOptions;
  username?: string | null;
  password?: string | null;
  connectTimeout?: number;
  keepAlive?: number;
  noDelay?: boolean;
  enableTLSForSentinelMode?: boolean;
}

interface ClusterLike {
  isCluster?: boolean;
  nodes(role: 'master' | 'all'): { options: ConnectionSettings }[];
}

/**
 * Where the engine's wake-up connection for a voter goes, asked again at each (re)connection
 * (undefined: nowhere known now, try later). The same endpoint and credentials as the voter's
 * own client: for a plain master its address; for a Sentinel-managed one, the server its client
 * is connected to now (the master Sentinel named last); for a Redis Cluster, one of its masters in
 * turn (a PUBLISH reaches every node of a cluster).
 */
export function wakeEndpointOf(client: Redis): (attempt: number) => WakeEndpoint | undefined {
  const cluster = client as unknown as ClusterLike;
  if (cluster.isCluster === true) {
    return (attempt) => {
      const nodes = cluster.nodes('master');
      const node = nodes[attempt % Math.max(nodes.length, 1)];
      return node && endpoint(node.options);
    };
  }
  const options = client.options as ConnectionSettings;
  if (isSentinelManaged(client.options)) {
    return () => {
      const stream = (client as unknown as { stream?: Socket }).stream;
      if (client.status !== 'ready' || !stream?.remoteAddress || !stream.remotePort) return undefined;
      // ioredis speaks TLS to a Sentinel-managed master only when told to.
      const tls = options.enableTLSForSentinelMode ? options.tls : undefined;
      return endpoint({ ...options, path: null, host: stream.remoteAddress, port: stream.remotePort, tls });
    };
  }
  const fixed = endpoint(options);
  return () => fixed;
}

function endpoint(options: ConnectionSettings): WakeEndpoint {
  const where = options.path
    ? { path: options.path }
    : { host: options.host ?? 'localhost', port: options.port ?? 6379, ...(options.family ? { family: options.family } : {}) };
  const tls = options.tls;
  return {
    // As ioredis's StandaloneConnector: the TLS options laid over the address.
    open: () => (tls ? { socket: connectTls({ ...where, ...tls }), ready: 'secureConnect' } : { socket: createConnection(where), ready: 'connect' }),
    auth: options.password ? (options.username ? [options.username, options.password] : [options.password]) : undefined,
    connectTimeoutMs: options.connectTimeout ?? 10_000,
    keepAliveMs: options.keepAlive ?? 30_000,
    noDelay: options.noDelay ?? true,
  };
}
