import { WAKE_CHANNEL_PREFIX } from '../lock/redlock-options.js';
import type { RedisNode } from '../voters/redis-node.js';
import { PROCESS_ID } from '../base/token.js';
import { WakeSubscriber, type WakeFailure } from './wake-subscriber.js';

/**
 * How long a key's channel stays subscribed after its last listener left: under steady
 * contention the next waiter for the key needs no SUBSCRIBE.
 */
const LINGER_MS = 1_000;

/**
 * Called with the id of the waiter whose turn it is, or '' for anyone, which master (its index)
 * said so, and, when that master says it granted the waiter the lock by hand-off, which request
 * of the waiter wrote the entry it granted (its anchor); or, with `recheckMs`, the id of a
 * runner-up that should look again within that many ms (the head was just woken, and may have
 * crashed). Anyone who can PUBLISH can say any of this: it is a reason to look (a round, or
 * asking the master), never a grant in itself.
 */
export type ReleaseListener = (nextWaiter: string, master: number, grantAnchor: number | undefined, recheckMs?: number) => void;

/**
 * What a waiter needs of the wake-ups (see Waiter.pause): to be told when a release may let it
 * in. ReleaseWakeups hears the masters' messages; an engine without Redis tells its waiters itself.
 */
export interface WakeupSource {
  /** Whether a listener registered now hears every release that names one of this process's waiters, without a subscription of its own. */
  readonly namesReachUs: boolean;
  /** Listens for releases of `channels` (the lock keys) at once; `subscribed` settles once broadcasts reach it too. */
  register(channels: readonly string[], onRelease: ReleaseListener): { stop: () => void; subscribed: () => Promise<void> };
}

/** Where the masters name this process's queue heads: "<waiter id>[/<anchor>/<elapsed>/<run_id> | +<ms>] <lock key>" (see handOn). */
const PROCESS_CHANNEL = WAKE_CHANNEL_PREFIX + PROCESS_ID;

/**
 * Wakes waiters when a lock they wait for is released: the release script names the queue's
 * head on its process's channel, or tells everyone on the lock key's channel that the queue
 * died. Each process keeps one subscriber connection per master, shared by every key, with
 * reference-counted subscriptions to the key channels. Messages can be lost (reconnects), and
 * a crashed holder publishes nothing, so waiters always keep a fallback timer as well.
 */
export class ReleaseWakeups implements WakeupSource {
  readonly #subscribers = new Map<RedisNode, WakeSubscriber>();
  readonly #listeners = new Map<string, Set<ReleaseListener>>();
  /** Channels listened to whose SUBSCRIBE has not been sent yet (see register). */
  readonly #unsubscribed = new Set<string>();
  /** Channels nobody listens to any more, still subscribed until the linger timer runs out. */
  readonly #lingering = new Set<string>();
  /** Channels whose SUBSCRIBE is still on its way, and the promise that settles with it. */
  readonly #subscribing = new Map<string, Promise<void>>();
  #lingerTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    private readonly nodes: readonly RedisNode[],
    /** Told when a master breaks its wake-up connection (never a crash: see WakeSubscriber). */
    private readonly onFailure: WakeFailure = () => {},
  ) {}

  /**
   * Listens for releases of any of `channels` on every master; resolves once every master that
   * is reachable has confirmed the subscription, so a release after that cannot be missed
   * (short of a lost message). Returns the function that stops listening.
   */
  async listen(channels: readonly string[], onRelease: ReleaseListener): Promise<() => void> {
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
  register(channels: readonly string[], onRelease: ReleaseListener): { stop: () => void; subscribed: () => Promise<void> } {
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

  #subscriber(node: RedisNode): WakeSubscriber {
    let subscriber = this.#subscribers.get(node);
    if (!subscriber) {
      const master = this.nodes.indexOf(node);
      const report = (problem: string, first: boolean) => this.onFailure(node, problem, first);
      subscriber = new WakeSubscriber((attempt) => node.client.wakeEndpoint(attempt), PROCESS_CHANNEL, (channel, message) => {
        const wake = readWake(channel, message);
        const set = wake && this.#listeners.get(wake.key);
        if (set) for (const listener of [...set]) listener(wake.next, master, wake.grantAnchor, wake.recheckMs);
      }, report);
      this.#subscribers.set(node, subscriber);
    }
    return subscriber;
  }
}

/**
 * A message as the release scripts publish it (see handOn): on a key's channel, '' (anyone); on
 * this process's channel, "<waiter id> <lock key>", "<waiter id>+<ms> <lock key>" for a runner-up
 * to look again within <ms>, or "<waiter id>/<anchor>/<elapsed>/<run_id> <lock key>" for a grant
 * (of which only the anchor is read: the rest is the master's to prove, see HandOffGrants).
 * Anything else is dropped. Waiter ids hold neither '/' nor '+'.
 */
export function readWake(
  channel: string,
  message: string,
): { key: string; next: string; grantAnchor: number | undefined; recheckMs?: number } | undefined {
  if (channel !== PROCESS_CHANNEL) return { key: channel, next: message, grantAnchor: undefined };
  const space = message.indexOf(' ');
  if (space <= 0) return undefined;
  const head = message.slice(0, space);
  const key = message.slice(space + 1);
  const [next, anchorText] = head.split('/', 2) as [string, string | undefined];
  if (anchorText === undefined) {
    const plus = head.indexOf('+');
    if (plus < 0) return { key, next, grantAnchor: undefined };
    const recheckMs = Number(head.slice(plus + 1));
    if (plus === 0 || head.length === plus + 1 || !(recheckMs >= 0)) return undefined;
    return { key, next: head.slice(0, plus), grantAnchor: undefined, recheckMs };
  }
  const anchor = Number(anchorText);
  if (anchorText === '' || !Number.isSafeInteger(anchor) || anchor < 0) return undefined;
  return { key, next, grantAnchor: anchor };
}
