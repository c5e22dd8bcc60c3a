import type { Redis } from 'ioredis';
import { WAKE_CHANNEL_PREFIX } from './lua-scripts.js';
import type { RedisNode } from './redis-node.js';
import { PROCESS_ID } from './token.js';

/**
 * How long a key's channel stays subscribed after its last listener left: under steady
 * contention the next waiter for the key needs no SUBSCRIBE.
 */
const LINGER_MS = 1_000;
/** How long a waiter waits for a master to confirm a subscription before relying on its timer. */
const SUBSCRIBE_WAIT_MS = 100;

/**
 * A grant by hand-off: which request of the waiter wrote the entry, how long before the grant by
 * the master's clock, and the run_id of the server that granted.
 */
export interface HandOffMessage {
  readonly anchor: number;
  readonly elapsed: number;
  readonly server: string;
}

/**
 * Called with the id of the waiter whose turn it is, or '' for anyone, which master (its index)
 * said so, and whether that master granted it the lock by hand-off; or, with `recheckMs`, the
 * id of a runner-up that should look again within that many ms (the head was just woken, and
 * may have crashed).
 */
type Listener = (nextWaiter: string, master: number, grant: HandOffMessage | undefined, recheckMs?: number) => void;

/** Where the masters name this process's queue heads: "<waiter id>[/<anchor>/<elapsed>/<run_id> | +<ms>] <lock key>" (see handOn). */
const PROCESS_CHANNEL = WAKE_CHANNEL_PREFIX + PROCESS_ID;

/**
 * Wakes waiters when a lock they wait for is released: the release script names the queue's
 * head on its process's channel, or tells everyone on the lock key's channel that the queue
 * died. Each process keeps one subscriber connection per master, shared by every key, with
 * reference-counted subscriptions to the key channels. Messages can be lost (reconnects), and
 * a crashed holder publishes nothing, so waiters always keep a fallback timer as well.
 */
export class ReleaseWakeups {
  readonly #subscribers = new Map<RedisNode, Subscriber>();
  readonly #listeners = new Map<string, Set<Listener>>();
  /** Channels listened to whose SUBSCRIBE has not been sent yet (see register). */
  readonly #unsubscribed = new Set<string>();
  /** Channels nobody listens to any more, still subscribed until the linger timer runs out. */
  readonly #lingering = new Set<string>();
  /** Channels whose SUBSCRIBE is still on its way, and the promise that settles with it. */
  readonly #subscribing = new Map<string, Promise<void>>();
  #lingerTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly nodes: readonly RedisNode[]) {}

  /**
   * Listens for releases of any of `channels` on every master; resolves once every master that
   * is reachable has confirmed the subscription, so a release after that cannot be missed
   * (short of a lost message). Returns the function that stops listening.
   */
  async listen(channels: readonly string[], onRelease: Listener): Promise<() => void> {
    const listening = this.register(channels, onRelease);
    await listening.subscribed();
    return listening.stop;
  }

  /**
   * Whether every master would now deliver a message naming one of this process's waiters: its
   * subscriber is connected and has confirmed this process's channel. A listener registered
   * while this holds hears every release by name published after that, with no SUBSCRIBE of its own.
   */
  get namesReachUs(): boolean {
    if (this.#subscribers.size < this.nodes.length) return false;
    for (const subscriber of this.#subscribers.values()) if (!subscriber.joinedNow) return false;
    return true;
  }

  /**
   * `listen` in two steps: the listener is in place at once (no round trip), to hear releases
   * by name from then on; `subscribed()` sends the channels' SUBSCRIBE (for the broadcasts of
   * queues that died) and settles as `listen` does.
   */
  register(channels: readonly string[], onRelease: Listener): { stop: () => void; subscribed: () => Promise<void> } {
    for (const channel of channels) {
      let set = this.#listeners.get(channel);
      if (!set) {
        set = new Set();
        this.#listeners.set(channel, set);
        // Still subscribed from a waiter that just left: no new SUBSCRIBE (under steady contention
        // one key is waited for again and again).
        if (!this.#lingering.delete(channel)) this.#unsubscribed.add(channel);
      }
      set.add(onRelease);
    }
    const stop = () => {
      const removed: string[] = [];
      for (const channel of channels) {
        const set = this.#listeners.get(channel);
        if (set?.delete(onRelease) && set.size === 0) {
          this.#listeners.delete(channel);
          // Never subscribed: nothing to undo.
          if (!this.#unsubscribed.delete(channel)) removed.push(channel);
        }
      }
      if (removed.length > 0) this.#unsubscribeLater(removed);
    };
    return { stop, subscribed: () => this.#subscribe(channels) };
  }

  async #subscribe(channels: readonly string[]): Promise<void> {
    const fresh = channels.filter((channel) => this.#unsubscribed.delete(channel));
    if (fresh.length > 0 && !this.#closed) {
      const subscribed = Promise.all(this.nodes.map((node) => this.#subscriber(node).subscribe(fresh))).then(() => undefined);
      for (const channel of fresh) this.#subscribing.set(channel, subscribed);
      void subscribed.finally(() => {
        for (const channel of fresh) if (this.#subscribing.get(channel) === subscribed) this.#subscribing.delete(channel);
      });
    }
    // A listener that joins a channel whose SUBSCRIBE another listener sent a moment ago waits for
    // it too: readers and permits of one process wait side by side, and a release published
    // before the subscription is in place would reach neither.
    const pending = new Set(channels.map((channel) => this.#subscribing.get(channel)).filter((p) => p !== undefined));
    if (pending.size > 0) await Promise.all(pending);
  }

  #unsubscribeLater(channels: string[]): void {
    for (const channel of channels) this.#lingering.add(channel);
    if (this.#lingerTimer) return;
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = undefined;
      const idle = [...this.#lingering];
      this.#lingering.clear();
      if (idle.length > 0) for (const subscriber of this.#subscribers.values()) subscriber.unsubscribe(idle);
    }, LINGER_MS);
    this.#lingerTimer.unref();
  }

  /** Closes the subscriber connections this engine opened. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#lingerTimer);
    for (const subscriber of this.#subscribers.values()) subscriber.close();
    this.#subscribers.clear();
  }

  #subscriber(node: RedisNode): Subscriber {
    let subscriber = this.#subscribers.get(node);
    if (!subscriber) {
      const master = this.nodes.indexOf(node);
      subscriber = new Subscriber(node.client, (channel, message) => {
        let key = channel;
        let next = message;
        let grant: HandOffMessage | undefined;
        let recheckMs: number | undefined;
        if (channel === PROCESS_CHANNEL) {
          const space = message.indexOf(' ');
          next = message.slice(0, space);
          key = message.slice(space + 1);
          const [id, anchor, elapsed, server] = next.split('/');
          const plus = next.indexOf('+');
          if (server !== undefined) {
            next = id!;
            grant = { anchor: Number(anchor), elapsed: Number(elapsed), server };
          } else if (plus >= 0) {
            recheckMs = Number(next.slice(plus + 1));
            next = next.slice(0, plus);
            // Not a hint the scripts write: nothing to act on.
            if (!(recheckMs >= 0)) return;
          }
        }
        const set = this.#listeners.get(key);
        if (set) for (const listener of [...set]) listener(next, master, grant, recheckMs);
      });
      this.#subscribers.set(node, subscriber);
    }
    return subscriber;
  }
}

class Subscriber {
  readonly #connection: Redis;
  /** Subscribed, or subscribing, to this process's channel. */
  #joined = false;
  #joinConfirmed = false;

  constructor(client: Redis, onMessage: (channel: string, message: string) => void) {
    // A connection of its own: a subscribed connection can run nothing else, and auto-pipelining
    // is pointless here. The offline queue must be on whatever the parent says: SUBSCRIBE is sent
    // right after the duplicate is created, before it has connected, and without a queue it would
    // fail at once (every wake-up for those channels lost). `subscribe` bounds the wait instead.
    this.#connection = client.duplicate({ enableAutoPipelining: false, lazyConnect: false, enableOfflineQueue: true });
    this.#connection.on('message', onMessage);
    // Failures surface as missed wake-ups, which the waiters' fallback timers cover.
    this.#connection.on('error', () => {});
  }

  /** This process's channel is confirmed and the connection up: messages naming our waiters arrive. */
  get joinedNow(): boolean {
    return this.#joinConfirmed && this.#connection.status === 'ready';
  }

  async subscribe(channels: string[]): Promise<void> {
    // The first SUBSCRIBE also joins this process's channel (until one succeeds); ioredis
    // re-subscribes after reconnects.
    const joining = !this.#joined;
    if (joining) {
      this.#joined = true;
      channels = [PROCESS_CHANNEL, ...channels];
    }
    // A master that is down cannot wake anyone, and the fallback timer covers it: wait for the
    // confirmation only briefly, and let the queued SUBSCRIBE land when the master comes back.
    const confirmed = this.#connection.subscribe(...channels).then(
      () => {
        if (joining) this.#joinConfirmed = true;
      },
      () => {
        if (joining) this.#joined = false;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SUBSCRIBE_WAIT_MS);
      timer.unref();
    });
    await Promise.race([confirmed, gaveUp]);
    clearTimeout(timer);
  }

  unsubscribe(channels: string[]): void {
    this.#connection.unsubscribe(...channels).catch(() => {});
  }

  close(): void {
    this.#connection.disconnect();
  }
}
