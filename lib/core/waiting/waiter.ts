import { LockHeldError, QuorumUnreachableError, type RedlockError } from '../base/errors.js';
import type { WaitOptions } from '../lock/redlock-options.js';
import type { Lock } from '../lock/lock.js';
import type { HandOffGrants, HandOffGrant } from './hand-off-grants.js';
import type { WakeupSource } from './release-wakeups.js';
import { PROCESS_ID } from '../base/token.js';

let sequence = 0;

/**
 * After the first master names this waiter, how long at least it waits for the others it needs
 * before it tries anyway (see #named).
 */
const MIN_WAKE_SPREAD_MS = 1;
/**
 * The same for a waiter granted the lock by hand-off on fewer masters than it needs: the others'
 * grants are on their way, and a round of its own now would take over the grants it has, and
 * give them away again if that round failed where the release has not landed yet.
 */
const MIN_GRANT_SPREAD_MS = 5;

/**
 * One acquire call's place in line: the identity and ticket it queues under on every master,
 * and the pause between its rounds. While the lock is held it sleeps until a release names it
 * (or anyone), with a fallback timer for a crashed holder or a lost message; masters in restart
 * quarantine it waits out exactly; for other failures it backs off with jitter.
 */
export class Waiter {
  /** Unique across processes; '' for a caller that does not queue (tryAcquire). */
  readonly id: string;
  /** Chosen once, sent to every master, so all masters order waiters alike. */
  readonly ticket: number;
  /** Refused at least once, so the masters may hold a queue entry of ours that a release must clear. */
  enlisted = false;
  #handed: Lock | undefined;
  /** Why the engine gave up this wait (releaseAll), once it has. */
  #abandoned: { reason: unknown } | undefined;
  /** Ends the current sleep with an error, while it lasts. */
  #interrupt: ((reason: unknown) => void) | undefined;
  #sleeping = false;
  #onClose: (() => void) | undefined;
  /** Between a pause's steps: its first SUBSCRIBE is out, and a hold handed over now is taken as in a sleep. */
  #subscribing = false;
  #woken = false;
  #wake: (() => void) | undefined;
  /** Set while listening for releases. */
  #stopListening: (() => void) | undefined;
  /** The SUBSCRIBE of the key channels, until the first pause has sent it. */
  #subscribe: (() => Promise<void>) | undefined;
  /** Listening since before the round that first queued this waiter, on masters that all deliver to this process. */
  #heardSinceRound = false;
  /** The masters that named this waiter since its last round began. */
  readonly #wokenBy = new Set<number>();
  /** How many must, before it tries: a quorum, or as many as refused it (only those queued it). */
  #wakesNeeded = 1;
  /** Ends the spread wait (see #namedBy) without waking, while it lasts. */
  #cancelSpread: (() => void) | undefined;
  #roundStartedAt = -1;
  #lastRoundMs = 0;
  /** By when (performance.now()) a master told this runner-up to look again, since its last round began. */
  #recheckAt = Number.POSITIVE_INFINITY;
  /** Brings the current sleep's timer forward to a time, while it lasts. */
  #shorten: ((at: number) => void) | undefined;
  #grants: HandOffGrants | undefined;
  #makeGrants: (() => HandOffGrants | undefined) | undefined;

  constructor(
    queues: boolean,
    private readonly wakeups: WakeupSource | undefined,
    private readonly channels: readonly string[],
    private readonly wait: Required<WaitOptions>,
    private readonly signal: AbortSignal | undefined,
    private readonly quorum = 1,
    /**
     * For a waiter that a release may grant the lock to (docs/GUARANTEES.md, "Server-side
     * hand-off"): made at the first use of `grants`, which an acquire won at its first plain try
     * never makes.
     */
    makeGrants?: () => HandOffGrants | undefined,
    /**
     * Releases may come without a word (node-redlock processes sharing the keys delete them and
     * publish nothing): look again every retryDelayMs while a lock is held, not only when woken.
     */
    private readonly unannouncedReleases = false,
  ) {
    sequence = (sequence + 1) % 1_000_000;
    this.id = queues ? `${PROCESS_ID}:${sequence}` : '';
    // Wall-clock ticket: the only clock every process shares. Skew between clients only costs
    // fairness, never safety. Microsecond slots keep tickets of one process apart.
    this.ticket = Date.now() * 1000 + (sequence % 1000);
    this.#makeGrants = makeGrants;
  }

  /** The hand-off grants this waiter may be given, made now if they were not yet (see `existingGrants`). */
  get grants(): HandOffGrants | undefined {
    const make = this.#makeGrants;
    if (make) {
      this.#makeGrants = undefined;
      const grants = make();
      grants?.whenConfirmed((verdict, master) => {
        if (verdict === 'held') this.#wakeUp();
        // A master that says the key is not ours did not release it to us: nothing to wake for.
        else if (verdict !== 'refuted') this.#namedBy(master, true);
      });
      this.#grants = grants;
    }
    return this.#grants;
  }

  /**
   * The grants, if `grants` has made them: a request that may be granted by hand-off takes its
   * token from them, so before that, no master can have granted this waiter anything.
   */
  get existingGrants(): HandOffGrants | undefined {
    return this.#grants;
  }

  /**
   * Waits before the next round. The first time, it subscribes, and resolves at once unless it
   * listened since before the round that queued it (see beforeRound): a release in between
   * could otherwise have gone unheard.
   */
  async pause(error: RedlockError, leftMs: number): Promise<void> {
    if (this.#grants?.lock) return;
    if (error instanceof QuorumUnreachableError && error.retryAfterMs !== undefined) {
      // Masters in restart quarantine vote again at a known time: asking before is pointless.
      await this.#sleep(Math.min(leftMs, error.retryAfterMs), false);
      return;
    }
    if (!(error instanceof LockHeldError) || !this.wakeups) {
      await this.#sleep(Math.min(leftMs, this.wait.retryDelayMs + Math.random() * this.wait.retryJitterMs), false);
      return;
    }
    this.#wakesNeeded = Math.max(1, Math.min(this.quorum, error.refusedBy.length));
    if (this.#roundStartedAt >= 0) this.#lastRoundMs = performance.now() - this.#roundStartedAt;
    if (!this.#stopListening) this.#listen();
    const subscribe = this.#subscribe;
    if (subscribe) {
      this.#subscribe = undefined;
      // A hold handed over meanwhile (offer) is ours whatever the SUBSCRIBE comes to.
      this.#subscribing = true;
      try {
        await subscribe();
      } catch (error) {
        if (!this.#handed) throw error;
      } finally {
        this.#subscribing = false;
      }
      if (this.#handed) return;
      // Listening since before the round that queued us, with every master's messages by name
      // reaching this process: no release that names us can have been missed. Otherwise one
      // may have come before we listened: try again at once.
      if (!this.#heardSinceRound) return;
    }
    const heldFor = error.retryAfterMs ?? this.wait.retryDelayMs;
    const fallback = (this.unannouncedReleases ? Math.min(heldFor, this.wait.retryDelayMs) : heldFor) + Math.random() * this.wait.retryJitterMs;
    await this.#sleepUntilWoken(Math.min(leftMs, fallback));
  }

  /**
   * Sleeps without asking the masters, while a caller of this process holds the lock: it will
   * hand the lock over or wake this waiter when it releases; `ms` bounds the wait in case it
   * never does (a lock that is lost and never released).
   */
  async standBy(ms: number): Promise<void> {
    await this.#sleepUntilWoken(ms);
  }

  /** Ends a sleep at once: the lock was just released by a caller of this process. */
  wakeNow(): void {
    this.#wakeUp();
  }

  /**
   * Called just before a round that may queue this waiter: it starts listening now (no round
   * trip), so that a release naming it right after the round cannot go unheard.
   */
  beforeRound(attempt = 0): void {
    // A caller that does not queue never pauses: nothing to time or listen for.
    if (!this.wakeups || this.id === '') return;
    this.#recheckAt = Number.POSITIVE_INFINITY;
    this.#grants?.sending(attempt);
    this.#roundStartedAt = performance.now();
    if (this.#stopListening) return;
    this.#heardSinceRound = this.wakeups.namesReachUs;
    this.#listen();
  }

  #listen(): void {
    const { stop, subscribed } = this.wakeups!.register(this.channels, (next, master, grantAnchor, recheckMs) =>
      recheckMs === undefined ? this.#named(next, master, grantAnchor) : this.#recheck(next, recheckMs),
    );
    this.#stopListening = stop;
    this.#subscribe = subscribed;
  }

  /**
   * The engine is shutting down (releaseAll): the wait ends now, as an abort would end it, and no
   * lock is handed over to it any more.
   */
  abandon(reason: unknown): void {
    this.#abandoned ??= { reason };
    this.#interrupt?.(reason);
  }

  /** Set once the engine gave up this wait: why. */
  get abandoned(): { reason: unknown } | undefined {
    return this.#abandoned;
  }

  /** A lock another caller of this process handed over while we slept, if any. */
  get handed(): Lock | undefined {
    return this.#handed;
  }

  /** A lock a majority of masters granted this waiter by hand-off, if any. */
  get granted(): HandOffGrant | undefined {
    return this.#grants?.lock;
  }

  /**
   * Takes over a lock released by a caller of this process, for the same resources, while this
   * waiter sleeps for its turn: false when it is not asleep (then the lock is released as usual).
   */
  offer(lock: Lock): boolean {
    if (!(this.#sleeping || this.#subscribing) || this.#handed || this.signal?.aborted || this.#abandoned) return false;
    this.#handed = lock;
    this.#woken = true;
    this.#wake?.();
    return true;
  }

  close(): void {
    this.#stopListening?.();
    this.#cancelSpread?.();
    const closed = this.#onClose;
    this.#onClose = undefined;
    closed?.();
  }

  /** `closed` runs once this wait is over (a hold, or given up): one listener at a time, the last one set. */
  whenClosed(closed: () => void): void {
    this.#onClose = closed;
  }

  /**
   * A master released the lock and named this waiter (or anyone). A release reaches the masters
   * one by one: a waiter that tried at the first message would find the lock still held where
   * the release has not landed yet, and fail its round. So it tries once as many masters as its
   * round needs have named it, or at the latest as long after the first as its last round took
   * (about how far apart the masters' answers come): the others may have no queue entry of it,
   * or their message may be lost.
   */
  #named(next: string, master: number, grantAnchor: number | undefined): void {
    if (next !== '' && next !== this.id) return;
    if (grantAnchor !== undefined && this.#grants) {
      const verdict = this.#grants.granted(master, grantAnchor);
      if (verdict === 'held') this.#wakeUp();
      // 'later': the master is asked whether it granted; its answer names this waiter (#namedBy) if that is not enough.
      if (verdict !== 'no') return;
    }
    this.#namedBy(master, grantAnchor !== undefined);
  }

  /**
   * A master woke the head of the queue and says we are next: should the head have crashed, its
   * entry lapses within `ms`, and nobody would name us. So we look again by then, unless named
   * first; a hint that comes while a round is out applies to the sleep after it.
   */
  #recheck(next: string, ms: number): void {
    if (next !== this.id) return;
    const at = performance.now() + ms + Math.random() * this.wait.retryJitterMs;
    if (at >= this.#recheckAt) return;
    this.#recheckAt = at;
    this.#shorten?.(at);
  }

  #namedBy(master: number, granting: boolean): void {
    this.#wokenBy.add(master);
    if (this.#wokenBy.size >= this.#wakesNeeded) {
      this.#wakeUp();
    } else if (this.#wokenBy.size === 1) {
      this.#cancelSpread?.();
      const spreadMs = granting ? Math.max(MIN_GRANT_SPREAD_MS, 2 * this.#lastRoundMs) : Math.max(MIN_WAKE_SPREAD_MS, this.#lastRoundMs);
      // Node runs due timers before it reads sockets: after a stall (GC, a busy host) the timer
      // would fire ahead of the other masters' messages that arrived during it, and cost a round
      // they make needless. setImmediate runs after those are read; confirmations they started
      // get one spread more (bounded: a master that hangs must not hold the waiter).
      let timer: NodeJS.Timeout | undefined;
      let immediate: NodeJS.Immediate | undefined;
      const endAfter = (ms: number, last: boolean) => {
        timer = setTimeout(() => {
          immediate = setImmediate(() => (!last && this.#grants?.asking ? endAfter(ms, true) : this.#wakeUp()));
        }, ms);
      };
      endAfter(spreadMs, false);
      this.#cancelSpread = () => {
        clearTimeout(timer);
        clearImmediate(immediate);
      };
    }
  }

  #wakeUp(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /** Sleeps until woken (or handed a lock) or `ms` pass, unless a wake-up already came since the last round. */
  async #sleepUntilWoken(ms: number): Promise<void> {
    if (!this.#woken) {
      this.#sleeping = true;
      try {
        await this.#sleep(Math.min(ms, this.#recheckAt - performance.now()), true);
      } finally {
        this.#sleeping = false;
      }
    }
    this.#woken = false;
    // A round begins: wake-ups count afresh from here.
    this.#wokenBy.clear();
    this.#cancelSpread?.();
    this.#cancelSpread = undefined;
  }

  /**
   * `ms`, cut short by the caller's signal or by releaseAll (rejecting), and when `wakeable` by a
   * wake-up too: a pause that only waits out a quarantine or a backoff must still end at once
   * at shutdown, or releaseAll would wait for it. A plain timer and promise rather than
   * timers/promises with an AbortController: aborting that costs two DOMExceptions with stack
   * traces, 40 to 100 µs that would sit between one holder's release and the next holder's start
   * on every wake-up and hand-over.
   */
  #sleep(ms: number, wakeable: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const finish = (stopped?: { reason: unknown }) => {
        clearTimeout(timer);
        this.signal?.removeEventListener('abort', onAbort);
        this.#wake = undefined;
        this.#shorten = undefined;
        this.#interrupt = undefined;
        // A lock handed over just as the caller gave up is still ours to release: keep it.
        if (stopped && !this.#handed) reject(stopped.reason);
        else resolve();
      };
      const onAbort = () => finish({ reason: this.signal!.reason });
      let timer = setTimeout(() => finish(), Math.max(0, ms));
      if (wakeable) {
        let due = performance.now() + ms;
        this.#wake = () => finish();
        this.#shorten = (at) => {
          if (at >= due) return;
          due = at;
          clearTimeout(timer);
          timer = setTimeout(() => finish(), Math.max(0, at - performance.now()));
        };
      }
      this.#interrupt = (reason) => finish({ reason });
      if (this.#abandoned) finish(this.#abandoned);
      else if (this.signal?.aborted) onAbort();
      else this.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
