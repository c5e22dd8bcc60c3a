import type { Socket } from 'node:net';
import { monotonicNow } from '../base/clock.js';
import type { InstrumentationGuard } from '../lock/instrumentation-guard.js';
import { command, ProtocolViolation, PubSubReader, type PubSubReply } from './pubsub-replies.js';
import type { RedisNode } from '../voters/redis-node.js';
import type { RedlockLogger } from '../lock/redlock-options.js';
import type { WakeEndpoint } from '../voters/clients/connection-endpoint.js';

/** How long a waiter waits for a master to confirm a subscription before relying on its timer. */
const SUBSCRIBE_WAIT_MS = 100;
const FIRST_RETRY_MS = 50;
/** The longest pause between reconnections; a connection joined this long counts as healthy again. */
const LONGEST_RETRY_MS = 5_000;
/** The least a bulk string may be: channels and messages are a lock key and a few ids. */
const MIN_BULK_LIMIT = 64 * 1024;

/** A master broke its wake-up connection: what it did (never its text), and whether it is the first time since it last behaved. */
export type WakeFailure = (node: RedisNode, problem: string, first: boolean) => void;

/** A reply the connection is owed, in the order the commands went out. */
type Owed = { readonly kind: 'auth' } | { readonly kind: 'subscribe' | 'unsubscribe'; readonly channel: string };

/**
 * One master's subscriber connection, for wake-ups. The engine's own, not an ioredis client: on
 * a subscribed connection ioredis throws, outside any promise, at a reply of the wrong shape
 * (ioredis 5 and 6: an integer in answer to SUBSCRIBE is a TypeError in its data handler, an
 * uncaught exception), so a misbehaving master would kill the process. Here every frame is read
 * strictly (PubSubReader): anything a real Redis would not send ends the connection, is reported
 * as that master's failure, and the connection is opened again with backoff and subscribes again.
 * Wake-ups lost meanwhile are covered by the waiters' fallback timers.
 */
export class WakeSubscriber {
  /** Every channel that should be subscribed, `home` (this process's channel) always among them. */
  readonly #wanted = new Set<string>();
  /** Channels whose SUBSCRIBE went out on the current connection, and those it confirmed. */
  readonly #requested = new Set<string>();
  readonly #confirmed = new Set<string>();
  readonly #owed: Owed[] = [];
  /** Per channel, the subscribe calls waiting for its confirmation; and how to end each call's wait. */
  readonly #waiting = new Map<string, Set<() => void>>();
  readonly #pending = new Set<() => void>();
  #socket: Socket | undefined;
  /** Connected: commands go out at once, and replies are owed for them. */
  #open = false;
  #joinedAt: number | undefined;
  #attempt = 0;
  #retry: NodeJS.Timeout | undefined;
  #failing = false;
  #closed = false;
  #longestChannel = 0;

  constructor(
    private readonly endpointFor: (attempt: number) => WakeEndpoint | undefined,
    private readonly home: string,
    private readonly onMessage: (channel: string, message: string) => void,
    private readonly report: (problem: string, first: boolean) => void,
  ) {
    this.#want([home]);
    this.#connect();
  }

  /** This process's channel is confirmed and the connection up: messages naming our waiters arrive. */
  get joinedNow(): boolean {
    return this.#open && this.#confirmed.has(this.home);
  }

  /**
   * Subscribes to `channels` (now, or as soon as the connection is up); resolves once they and
   * this process's channel are confirmed, or after SUBSCRIBE_WAIT_MS, or when the connection
   * fails: a master that is down cannot wake anyone, and the fallback timer covers it.
   */
  subscribe(channels: readonly string[]): Promise<void> {
    this.#want(channels);
    if (this.#open) this.#request(channels.filter((channel) => !this.#requested.has(channel)));
    const awaited = [this.home, ...channels].filter((channel) => !this.#confirmed.has(channel));
    if (awaited.length === 0 || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      let left = awaited.length;
      const confirmed = () => {
        if (--left === 0) done();
      };
      const done = () => {
        clearTimeout(timer);
        this.#pending.delete(done);
        for (const channel of awaited) {
          const set = this.#waiting.get(channel);
          // Channels come and go with the keys waited for: keep no entry for one nobody awaits.
          if (set?.delete(confirmed) && set.size === 0) this.#waiting.delete(channel);
        }
        resolve();
      };
      const timer = setTimeout(done, SUBSCRIBE_WAIT_MS);
      timer.unref();
      this.#pending.add(done);
      for (const channel of awaited) {
        let set = this.#waiting.get(channel);
        if (!set) this.#waiting.set(channel, (set = new Set()));
        set.add(confirmed);
      }
    });
  }

  unsubscribe(channels: readonly string[]): void {
    const leaving = channels.filter((channel) => channel !== this.home && this.#wanted.delete(channel));
    for (const channel of leaving) {
      this.#requested.delete(channel);
      this.#confirmed.delete(channel);
    }
    if (this.#open && leaving.length > 0) this.#send('unsubscribe', leaving);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#socket?.destroy();
    this.#releaseWaiters();
  }

  #want(channels: readonly string[]): void {
    for (const channel of channels) {
      this.#wanted.add(channel);
      this.#longestChannel = Math.max(this.#longestChannel, Buffer.byteLength(channel));
    }
  }

  #connect(): void {
    this.#retry = undefined;
    if (this.#closed) return;
    let endpoint: WakeEndpoint | undefined;
    let opened: ReturnType<WakeEndpoint['open']> | undefined;
    try {
      endpoint = this.endpointFor(this.#attempt);
      opened = endpoint?.open();
    } catch {
      // Options net or tls refuse (a bad certificate file, say): as a connection that failed.
    }
    if (!endpoint || !opened) {
      this.#retryLater();
      return;
    }
    const { socket, ready } = opened;
    this.#socket = socket;
    socket.unref();
    const reader = new PubSubReader(() => Math.max(MIN_BULK_LIMIT, 2 * this.#longestChannel + 1_024));
    const connectTimer = setTimeout(() => socket.destroy(), endpoint.connectTimeoutMs);
    connectTimer.unref();
    socket.once(ready, () => {
      clearTimeout(connectTimer);
      socket.setNoDelay(endpoint.noDelay);
      if (endpoint.keepAliveMs > 0) socket.setKeepAlive(true, endpoint.keepAliveMs);
      this.#open = true;
      if (endpoint.auth) {
        this.#owed.push({ kind: 'auth' });
        socket.write(command(['AUTH', ...endpoint.auth]));
      }
      this.#request([...this.#wanted]);
    });
    socket.on('data', (chunk: Buffer) => {
      if (this.#socket !== socket) return;
      try {
        for (const reply of reader.push(chunk)) this.#receive(reply);
      } catch (error) {
        this.#fail(error instanceof ProtocolViolation ? `sent ${error.message}` : 'sent a reply that could not be read');
      }
    });
    // The 'close' that follows every error is what counts.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(connectTimer);
      if (this.#socket === socket) this.#lost();
    });
  }

  #receive(reply: PubSubReply): void {
    if (reply.kind === 'message') {
      try {
        this.onMessage(reply.channel, reply.message);
      } catch {
        // What a master publishes must not reach the process as an exception either.
        this.#complain('published a message that could not be read');
      }
      return;
    }
    const owed = this.#owed.shift();
    if (!owed) throw new ProtocolViolation(`${kindOf(reply)} in answer to no command`);
    if (owed.kind === 'auth') {
      if (reply.kind === 'status' && reply.text === 'OK') return;
      throw new ProtocolViolation(reply.kind === 'error' ? 'an error in answer to AUTH (wrong username or password?)' : `${kindOf(reply)} in answer to AUTH`);
    }
    const asked = owed.kind.toUpperCase();
    if (reply.kind === 'error') throw new ProtocolViolation(`an error in answer to ${asked} (no AUTH, or not allowed the channel?)`);
    if (reply.kind !== owed.kind) throw new ProtocolViolation(`${kindOf(reply)} in answer to ${asked}`);
    if (reply.channel !== owed.channel) throw new ProtocolViolation(`a confirmation of another channel in answer to ${asked}`);
    if (reply.kind === 'subscribe' && this.#wanted.has(reply.channel)) {
      this.#confirmed.add(reply.channel);
      if (reply.channel === this.home) this.#joinedAt ??= monotonicNow();
      for (const confirmed of [...(this.#waiting.get(reply.channel) ?? [])]) confirmed();
    }
  }

  #request(channels: readonly string[]): void {
    if (channels.length === 0) return;
    for (const channel of channels) this.#requested.add(channel);
    this.#send('subscribe', channels);
  }

  #send(kind: 'subscribe' | 'unsubscribe', channels: readonly string[]): void {
    for (const channel of channels) this.#owed.push({ kind, channel });
    this.#socket!.write(command([kind.toUpperCase(), ...channels]));
  }

  #fail(problem: string): void {
    this.#complain(problem);
    this.#socket?.destroy();
  }

  #complain(problem: string): void {
    const first = !this.#failing || this.#healthy();
    this.#failing = true;
    try {
      this.report(problem, first);
    } catch {
      // A logger that throws must not turn the master's failure into the process's.
    }
  }

  /** The connection closed: everything owed on it is void; open another after a pause. */
  #lost(): void {
    if (this.#healthy()) this.#attempt = 0;
    this.#socket = undefined;
    this.#open = false;
    this.#joinedAt = undefined;
    this.#requested.clear();
    this.#confirmed.clear();
    this.#owed.length = 0;
    this.#releaseWaiters();
    this.#retryLater();
  }

  #retryLater(): void {
    if (this.#closed) return;
    const delay = Math.min(FIRST_RETRY_MS * 2 ** this.#attempt, LONGEST_RETRY_MS);
    this.#attempt++;
    this.#retry = setTimeout(() => this.#connect(), delay);
    this.#retry.unref();
  }

  /** Joined long enough that its failure starts a new streak: retries start over, the report is a first one. */
  #healthy(): boolean {
    return this.#joinedAt !== undefined && monotonicNow() - this.#joinedAt >= LONGEST_RETRY_MS;
  }

  #releaseWaiters(): void {
    for (const done of [...this.#pending]) done();
  }
}

function kindOf(reply: PubSubReply): string {
  switch (reply.kind) {
    case 'status':
      return 'a status';
    case 'error':
      return 'an error';
    default:
      return `a ${reply.kind} confirmation`;
  }
}

/**
 * Reports a master's broken wake-up connection like its other failures: to the instrumentation
 * each time (operation `wakeup`), to the log once per streak. Names the master only by its safe name.
 */
export function wakeFailureReporter(logger: RedlockLogger, instrumentation: InstrumentationGuard | undefined): WakeFailure {
  return (node, problem, first) => {
    instrumentation?.masterFailed(node.address, 'error', 'wakeup');
    if (first) {
      logger.warn(
        `redlock: master ${node.name} ${problem} on its wake-up connection; that connection is reopened with backoff, ` +
          'and waiters rely on their fallback timers meanwhile',
      );
    }
  };
}
