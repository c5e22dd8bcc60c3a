import type { MasterAddress } from '../../lock/instrumentation.js';
import type { SentinelAddressOptions, SentinelVerdict } from '../sentinel-voter.js';
import type { WakeEndpoint } from './connection-endpoint.js';

/** An argument of a command as the engine sends it: numbers go out as their decimal text. */
export type CommandArgument = string | number;

/**
 * One master's connection as the voters use it, whichever library made it (ioredis or
 * node-redis): the few commands the engine sends, what it must know of the connection's life,
 * and where to open a connection of its own. One adapter per client object, shared by every
 * engine made over that client, so what is counted per connection (closes, scripts loaded) is
 * counted once.
 */
export interface MasterClient {
  /** Which library the caller's client is from: only for messages, never for behaviour above the voters. */
  readonly library: 'ioredis' | 'node-redis';
  /** How errors, logs and telemetry name the master (never with credentials). */
  readonly address: MasterAddress;
  /** The names that mean this master, for refusing it twice (its address, or each of its sentinels). */
  readonly voterKeys: readonly string[];
  /** Set for a master found through Sentinel, which another server can replace without a restart. */
  readonly sentinel: SentinelWatch | undefined;
  /** Whether the connection can carry commands now. */
  readonly ready: boolean;
  /**
   * How many times the connection has closed (or been given up to reconnect) since the first
   * engine used this client. Counted before any reply of the next connection can arrive, so a
   * request whose reply comes with another count crossed a reconnection.
   */
  readonly closes: number;
  /** The `closes` count of the connection on which the engine's scripts were last loaded. */
  scriptsLoadedOn: number | undefined;

  evalsha(sha: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown>;
  eval(source: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown>;
  /** Any other command the voters send (SET, PTTL, CLUSTER MYID, SCRIPT LOAD): the reply as the server gave it. */
  command(name: string, args: readonly CommandArgument[]): Promise<unknown>;
  /** INFO of one section, as text. */
  info(section: string): Promise<string>;
  ping(): Promise<unknown>;
  /** WAIT: how many replicas acknowledged the connection's writes. */
  wait(replicas: number, timeoutMs: number): Promise<unknown>;
  publish(channel: string, message: string): Promise<unknown>;
  /**
   * SUBSCRIBE and UNSUBSCRIBE of `channel` over a connection of its own, made like this one,
   * closed after: whether the user may listen there.
   */
  trySubscribe(channel: string): Promise<void>;
  /** Where the engine's own wake-up connection goes, asked at each (re)connection (see WakeSubscriber). */
  wakeEndpoint(attempt: number): WakeEndpoint | undefined;
}

/** A Sentinel-managed master: its options (for names) and what its Sentinels say of it. */
export interface SentinelWatch {
  readonly options: SentinelAddressOptions;
  watch(): { verdict: Promise<SentinelVerdict>; stop(): void };
}

/** NOSCRIPT: the server has lost its script cache (restart, SCRIPT FLUSH); the script must be sent whole. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * A script by EVALSHA, and by EVAL when the server has lost it: without registering commands
 * on a client the caller may share with other code.
 */
export function runScript(client: MasterClient, sha: string, source: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown> {
  let sent: Promise<unknown>;
  try {
    sent = client.evalsha(sha, numKeys, argv);
  } catch (error) {
    return Promise.reject(error);
  }
  // A `then`, not an async function: one promise fewer per master and script.
  return sent.then(undefined, (error: unknown) => {
    if (!isNoScript(error)) throw error;
    return client.eval(source, numKeys, argv);
  });
}
