import { createConnection, type Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';

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

/** What a connection is made from, read out of either library's options. */
export interface ConnectionSettings {
  host?: string;
  port?: number;
  path?: string | null;
  family?: number;
  /** TLS options laid over the address; undefined for plain TCP. */
  tls?: ConnectionOptions;
  username?: string | null;
  password?: string | null;
  connectTimeoutMs: number;
  keepAliveMs: number;
  noDelay: boolean;
}

/** The endpoint of a connection made like the client's own (its address, TLS and credentials). */
export function connectionEndpoint(settings: ConnectionSettings): WakeEndpoint {
  const where = settings.path
    ? { path: settings.path }
    : { host: settings.host ?? 'localhost', port: settings.port ?? 6379, ...(settings.family ? { family: settings.family } : {}) };
  const tls = settings.tls;
  return {
    // As both clients do: the TLS options laid over the address.
    open: () => (tls ? { socket: connectTls({ ...where, ...tls }), ready: 'secureConnect' } : { socket: createConnection(where), ready: 'connect' }),
    auth: settings.password ? (settings.username ? [settings.username, settings.password] : [settings.password]) : undefined,
    connectTimeoutMs: settings.connectTimeoutMs,
    keepAliveMs: settings.keepAliveMs,
    noDelay: settings.noDelay,
  };
}
