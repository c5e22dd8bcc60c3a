import { monotonicNow } from '../../base/clock.js';
import { HANDED_OVER, Lock, type LockEngine, type ReleaseResult } from '../../lock/lock.js';
import type { RoundResult } from '../../rounds/quorum-round.js';
import type { HeldBy } from '../hold-kind.js';

/**
 * At most this many readers join one hold: readers of a process that keep overlapping would
 * otherwise keep its hold on the masters for ever, and a writer waiting there with it. A writer
 * so waits for at most the founder and this many readers after it (the bound the exclusive
 * lock's hand-overs within a process keep, HAND_OVER_BATCH), and later readers queue behind it.
 */
const JOINS_PER_HOLD = 8;

/**
 * One read hold on the masters (one token) that this process tracks: readers joined it, or
 * one of its holders extended it.
 */
class SharedRead {
  /** Every handle of the hold not yet released: the founder's and the joiners'. */
  readonly members = new Set<Lock>();
  /**
   * Per member, the latest deadline (monotonic ms) an extension sent for it may give it: until
   * the engine has read that extension's round and renewed the handle, its `remainingMs()`
   * still shows the deadline from before.
   */
  readonly promised = new Map<Lock, number>();
  /** How many readers joined it. */
  joins = 0;
  /** How its holder had the hold (its winning round, its waiter), once it let go: what the release on the masters needs. */
  held: HeldBy | undefined;
  /** Its extension in flight, settled once that has answered: the next extension, and the release, go after it. */
  extending: Promise<unknown> | undefined;
  /** The release on the masters, once the last member relying on the hold let go. */
  freed: Promise<ReleaseResult> | undefined;

  constructor(
    /** The handle that won the hold in a round (the founder), or one that came with it (adopted). */
    readonly holder: Lock,
  ) {
    this.members.add(holder);
  }

  /** How long (ms) its members still rely on it: what a joiner may be given. */
  reliedOnMs(): number {
    let most = 0;
    for (const member of this.members) most = Math.max(most, member.remainingMs());
    return most;
  }

  /** How long (ms) the hold must last on the masters for the members other than `except`, their extensions sent counted. */
  neededMs(except: Lock): number {
    const now = monotonicNow();
    let most = 0;
    for (const member of this.members) {
      if (member === except || member.released) continue;
      most = Math.max(most, member.remainingMs(), (this.promised.get(member) ?? 0) - now);
    }
    return most;
  }
}

/**
 * Readers of this process sharing one read hold on the masters. A new reader of a line joins the
 * newest hold a reader of this process won there on the masters while a reader of it still holds
 * it, at least half the ttl asked for is left, and it has taken fewer than JOINS_PER_HOLD
 * joiners: it gets a handle under the same token, valid no longer than any member, and no round
 * trip. A read-mostly key so costs the masters one acquire and one release per group of readers
 * that overlap in a process, not per reader.
 *
 * What keeps it safe (docs/GUARANTEES.md, "Readers of one process share a hold"):
 * - No member is valid past the masters' expiry of the hold: a joiner is valid no longer than a
 *   member already is; an extension by one member asks for at least what every other member
 *   relies on, or may by an extension already sent, plus its drift margin; and a hold's
 *   extensions go one at a time, so none lands after a later one that counted on it.
 * - The hold leaves the masters only when no member relies on it any more (released, expired or
 *   lost), and goes to another process (`lock.handOver()`) only when no other member relies on it.
 * - A writer waits for joins no longer than the founder's hold and JOINS_PER_HOLD readers' after it.
 */
export class ReadersHere {
  /** Per line, the newest hold a reader of this process won on the masters (unfenced). */
  readonly #founders = new Map<string, Lock>();
  /** The holds tracked, by token. */
  readonly #shared = new Map<string, SharedRead>();
  #pruneAt = 64;

  /** A reader of `line` won `lock` on the masters: it founds the line's hold to join. */
  won(line: string, lock: Lock): void {
    if (lock.fence !== undefined) return;
    this.#founders.set(line, lock);
    if (this.#founders.size >= this.#pruneAt) this.#prune();
  }

  /** Whether a new reader of `line` could join a hold now (for a ttl up to twice what is left). */
  open(line: string): boolean {
    return this.#openHold(line) !== undefined;
  }

  /** A handle for a new reader of `line` asking for `ttlMs`, sharing the hold a reader of this process has there, if the rules allow. */
  join(line: string, ttlMs: number, engine: LockEngine): Lock | undefined {
    const open = this.#openHold(line);
    if (!open || open.leftMs < ttlMs / 2) return undefined;
    const { founder } = open;
    let shared = open.shared;
    if (!shared) this.#shared.set(founder.token, (shared = new SharedRead(founder)));
    // Valid as long as a member already is, and no longer than it asked for (the hold may outlast that).
    const joined = new Lock(engine, founder.resources, founder.keys, founder.token, ttlMs, monotonicNow() + Math.min(open.leftMs, ttlMs), undefined, founder.kind);
    shared.members.add(joined);
    shared.joins++;
    if (this.#shared.size >= this.#pruneAt) this.#prune();
    return joined;
  }

  /** The hold of `line` that takes joiners now, and how long a joiner may be given. */
  #openHold(line: string): { founder: Lock; shared: SharedRead | undefined; leftMs: number } | undefined {
    const founder = this.#founders.get(line);
    if (!founder) return undefined;
    const shared = this.#shared.get(founder.token);
    if (shared && (shared.freed || shared.joins >= JOINS_PER_HOLD)) return undefined;
    const leftMs = shared ? shared.reliedOnMs() : founder.remainingMs();
    return leftMs > 0 ? { founder, shared, leftMs } : undefined;
  }

  /**
   * Sends `lock`'s extension to `ttlMs` by `send`, after the hold's extension in flight (if any)
   * has answered, at a ttl no shorter than what the hold's other members need, drift included.
   */
  async extend(lock: Lock, ttlMs: number, driftFactor: number, send: (ttlMs: number) => Promise<RoundResult>): Promise<RoundResult> {
    let shared = this.#shared.get(lock.token);
    if (!shared) this.#shared.set(lock.token, (shared = new SharedRead(lock)));
    const before = shared.extending;
    const hold = shared;
    const extension = (async () => {
      if (before) await before;
      // What the engine may make of this extension: a deadline within `ttlMs` of now.
      hold.promised.set(lock, Math.max(hold.promised.get(lock) ?? 0, monotonicNow() + ttlMs));
      return send(Math.max(ttlMs, ttlCovering(hold.neededMs(lock), driftFactor)));
    })();
    const settled = extension.then(
      () => undefined,
      () => undefined,
    );
    hold.extending = settled;
    try {
      return await extension;
    } finally {
      if (hold.extending === settled) hold.extending = undefined;
    }
  }

  /**
   * `lock`'s caller lets go of it. `free` gives the hold back on the masters (with how the founder
   * had it), and runs only once no member relies on the hold any more; until then the others
   * keep it, and this release is over at once.
   */
  release(lock: Lock, line: string, held: HeldBy | undefined, free: (held: HeldBy | undefined) => Promise<ReleaseResult>): Promise<ReleaseResult> {
    const shared = this.#shared.get(lock.token);
    if (!shared) {
      if (this.#founders.get(line) === lock) this.#founders.delete(line);
      return free(held);
    }
    shared.members.delete(lock);
    shared.promised.delete(lock);
    // The release on the masters goes behind the winning round's requests still in flight, and
    // drops the founder's queue entries: a joiner's left the queues when it joined.
    if (lock === shared.holder) shared.held = held;
    if (!shared.freed) {
      if (shared.reliedOnMs() > 0) return Promise.resolve(HANDED_OVER);
      if (this.#founders.get(line)?.token === lock.token) this.#founders.delete(line);
      const founderHeld = shared.held ?? held;
      shared.freed = shared.extending ? shared.extending.then(() => free(founderHeld)) : free(founderHeld);
    }
    if (shared.members.size === 0) this.#shared.delete(lock.token);
    return shared.freed;
  }

  /** Why `lock` may not leave this process (`lock.handOver()`) now, if it may not. */
  handOverRefusal(lock: Lock): string | undefined {
    const shared = this.#shared.get(lock.token);
    if (!shared || shared.neededMs(lock) <= 0) return undefined;
    return 'other readers of this process share its hold on the masters: a handle would let another process release it under them';
  }

  /** `lock` left for another process, its hold with it: nobody here joins it any more. */
  handedAway(lock: Lock, line: string): void {
    if (this.#founders.get(line)?.token === lock.token) this.#founders.delete(line);
    this.#shared.delete(lock.token);
  }

  /** Holds never released (left to expire) would stay here for good: dropped once nobody relies on them. */
  #prune(): void {
    for (const [line, founder] of this.#founders) if (founder.remainingMs() <= 0 && !this.#shared.has(founder.token)) this.#founders.delete(line);
    for (const [token, shared] of this.#shared) if (!shared.freed && !shared.extending && shared.reliedOnMs() <= 0) this.#shared.delete(token);
    this.#pruneAt = Math.max(64, (this.#founders.size + this.#shared.size) * 2);
  }
}

/**
 * The ttl whose validity (ttl less drift, validityMs) still covers `neededMs` from now: the other
 * members' deadlines were counted with their own drift margin against the masters' clocks, which
 * an extension that sets the hold's expiry anew must keep.
 */
function ttlCovering(neededMs: number, driftFactor: number): number {
  return neededMs <= 0 ? 0 : Math.ceil((neededMs + 3) / (1 - driftFactor));
}
