import type { MasterAddress } from '../lock/instrumentation.js';
import { endpointName } from '../base/redact.js';

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
  return endpointName(host, port);
}

/** Why a Sentinel client cannot be a voter, or undefined when it can. */
export function sentinelVoterProblem(options: SentinelAddressOptions): string | undefined {
  if (options.role !== undefined && options.role !== null && options.role !== 'master') {
    return `role "${String(options.role)}" reaches a replica, which refuses writes; a voter must be its group's master (role "master", the default)`;
  }
  return undefined;
}

type Listener = (...args: unknown[]) => void;

/** The part of an ioredis client that tells what its Sentinels said. */
interface SentinelEvents {
  readonly status: string;
  on(event: string, listener: Listener): unknown;
  off(event: string, listener: Listener): unknown;
}

/**
 * What a Sentinel-managed client's Sentinels said: `no such master` when a whole pass over the
 * listed ones gave no address and those that answered said they monitor no master of that name
 * (`message` names them); `no answer` when none gave an address for other reasons (down,
 * refused); `address given` when the client reached the master, or got an address it could not
 * connect to (it closed and tries again), or ended.
 */
export type SentinelVerdict = { readonly kind: 'no such master'; readonly message: string } | { readonly kind: 'no answer' | 'address given' };

/**
 * Listens until the Sentinels have had their say (see SentinelVerdict). A group name no Sentinel
 * monitors (a typo) looks to the client's commands like any outage ("Stream isn't writeable",
 * or a command queued for ever); ioredis says why only in the `sentinelError` event of each
 * Sentinel it asks, on each pass over them: `ERR No such master with that name` (or a nil
 * address, with `updateSentinels: false`). `stop()` removes the listeners.
 */
export function watchSentinels(client: SentinelEvents, options: SentinelAddressOptions): { verdict: Promise<SentinelVerdict>; stop(): void } {
  const sentinels = options.sentinels?.length ?? 0;
  /** Per Sentinel that failed to give an address: whether it said it monitors no such master. */
  const failed = new Map<string, boolean>();
  let decide: (verdict: SentinelVerdict) => void = () => {};
  const verdict = new Promise<SentinelVerdict>((resolve) => (decide = resolve));
  const heard: Listener = (error) => {
    const text = error instanceof Error ? error.message : String(error);
    // "failed to connect to sentinel <host:port> because <why>",
    // "connected to sentinel <host:port> successfully, but got an invalid reply: null"
    const sentinel = /\bsentinel (\S+) (?:because|successfully)/.exec(text)?.[1];
    if (!sentinel) return;
    failed.set(sentinel, /No such master with that name|invalid reply: null$/.test(text));
    if (failed.size < sentinels) return;
    const denied = [...failed].flatMap(([at, unknown]) => (unknown ? [at] : []));
    if (denied.length === 0) return decide({ kind: 'no answer' });
    decide({
      kind: 'no such master',
      message: `no Sentinel monitors a master of that name (${denied.join(', ')} said "No such master with that name"); check the name the Sentinels monitor it under`,
    });
  };
  const found: Listener = () => decide({ kind: 'address given' });
  const events: Record<string, Listener> = { sentinelError: heard, ready: found, close: found, end: found };
  for (const [event, listener] of Object.entries(events)) client.on(event, listener);
  if (client.status === 'ready' || client.status === 'end') found();
  return { verdict, stop: () => Object.entries(events).forEach(([event, listener]) => client.off(event, listener)) };
}
