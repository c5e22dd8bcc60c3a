import { monotonicNow, validityMs } from './clock.js';
import type { RoundResult } from './quorum-round.js';
import type { RedisNode } from './redis-node.js';
import type { HandOffMessage } from './release-wakeups.js';
import { newToken } from './token.js';

/** A lock granted by hand-off: its token, its validity deadline (monotonic ms), and the round that queued it. */
export interface HandOffGrant {
  readonly token: string;
  readonly deadline: number;
  /** The waiter's round whose refusals queued it: a release must not overtake its stragglers. */
  readonly round: RoundResult;
  /** The masters (by index) that granted it: their grant dropped its queue entry there. */
  readonly masters: ReadonlySet<number>;
}

/**
 * One waiter's grants by server-side hand-off (docs/GUARANTEES.md, "Server-side hand-off"): a
 * release that frees the key on a master where this waiter heads the queue sets the key to the
 * token the waiter's request left in its entry, and says so by message. The waiter holds the lock
 * once a majority granted it that way, with validity left.
 *
 * Every request k of the waiter carries its own token, `prefix` + k, and the entry it writes names
 * k (its anchor). The rules that keep the count honest:
 * - Only grants anchored at the latest request count. A later request takes over, with its own
 *   token, any key an earlier grant set (the acquire script treats the prefix as ours), so an
 *   older grant is either taken over and counted in that request's own round, or gone.
 * - Only masters that refused that request count: a master whose answer was a grant, an error or
 *   none in time gets the failed round's cleanup, which could delete a grant made before it
 *   lands. (A straggler's cleanup waits for its answer, and is not sent if that is a refusal: a
 *   grant from a master whose answer is still on its way counts once that answer is a refusal.)
 * - Only over the connection the request went out on: a master whose connection closed since
 *   may be another server (a restart), whose grant is no vote.
 * - Only from the server that master's connection identified (the grant names its run_id), and
 *   once per server: a server listed under two names, whose one message reaches both names'
 *   subscribers, grants once; and never from a server that the round's cleanup reaches under
 *   another name (see #cleanupMayReach).
 * - Validity: request k left at `sentAt`, so the entry it wrote was stamped after that, and the
 *   key lives `ttl` after the grant, `elapsed` after the stamp by the master's clock: it cannot
 *   expire before `sentAt + (elapsed + ttl) * (1 - drift)`, less the usual 2 ms (and 1 ms for the
 *   two stamps' millisecond rounding). The message's own delay only costs validity.
 */
export class HandOffGrants {
  /** Every token of this waiter starts with it: random, so no other waiter's token can. */
  readonly prefix = `${newToken()}.`;
  #anchor = 0;
  #sentAt = 0;
  /** The failed round of request #anchor, once decided. */
  #round: RoundResult | undefined;
  /** Per master, its connection when request #anchor went out. */
  #sentOn: number[] = [];
  /** Grants for #anchor that arrived before its round was decided. */
  #early: [number, HandOffMessage][] = [];
  /** Per counted master, the deadline its grant allows. */
  readonly #deadlines = new Map<number, number>();
  /** The servers (run_id) counted. */
  readonly #servers = new Set<string>();
  #granted: HandOffGrant | undefined;
  #heard = false;
  /** Told of a grant counted after the message that brought it (see `granted`). */
  #onLate: ((held: boolean, master: number) => void) | undefined;

  constructor(
    private readonly nodes: readonly RedisNode[],
    private readonly quorum: number,
    private readonly ttlMs: number,
    private readonly driftFactor: number,
  ) {}

  /** `landed` hears of each grant `granted` answered 'later' for, once counted: whether the lock is held now. */
  whenCounted(landed: (held: boolean, master: number) => void): void {
    this.#onLate = landed;
  }

  tokenFor(anchor: number): string {
    return this.prefix + anchor;
  }

  /** Request `anchor` is about to be sent: grants anchored earlier stop counting. */
  sending(anchor: number): void {
    this.#anchor = anchor;
    this.#sentAt = monotonicNow();
    this.#sentOn = this.nodes.map((node) => node.connection);
    this.#round = undefined;
    this.#early = [];
    this.#deadlines.clear();
    this.#servers.clear();
  }

  /** Request #anchor's round failed: the masters that refused it may now grant by hand-off. */
  failed(round: RoundResult): void {
    this.#round = round;
    const early = this.#early;
    this.#early = [];
    for (const [master, grant] of early) {
      if (this.#count(master, grant) !== 'later') this.#onLate?.(this.#granted !== undefined, master);
    }
  }

  /**
   * The master of index `master` says (by the message its subscriber received) that it granted
   * request `grant.anchor` by hand-off, `grant.elapsed` ms (its clock) after that request wrote
   * the entry: 'held' once the lock is, 'no' when it does not count or is not enough, 'later'
   * when it can only be counted once the round is decided or that master's answer has landed
   * (then `whenCounted` hears of it).
   */
  granted(master: number, grant: HandOffMessage): 'held' | 'no' | 'later' {
    this.#heard = true;
    if (this.#granted) return 'held';
    if (grant.anchor !== this.#anchor) return 'no';
    if (!this.#round) {
      this.#early.push([master, grant]);
      return 'later';
    }
    return this.#count(master, grant);
  }

  #count(master: number, grant: HandOffMessage): 'held' | 'no' | 'later' {
    const round = this.#round!;
    if (round.outcomes[master]?.status !== 'pending') return this.#add(master, grant) ? 'held' : 'no';
    const anchor = this.#anchor;
    void round.requests[master]?.then(
      () => {
        if (anchor === this.#anchor && !this.#granted) this.#onLate?.(this.#add(master, grant), master);
      },
      () => {},
    );
    return 'later';
  }

  /** Some master granted this waiter a key: one it must hand on if it ends up not holding the lock with that key's token. */
  get heard(): boolean {
    return this.#heard;
  }

  /** The lock, once a majority granted it with validity left. */
  get lock(): HandOffGrant | undefined {
    return this.#granted;
  }

  /**
   * Whether the failed round's cleanup (a compare-and-delete of this very token) goes to `server`
   * under a name that did not refuse: a server listed twice, one name refusing and the other
   * failing, would have the grant deleted behind the waiter's back. A name never identified
   * could be any server.
   */
  #cleanupMayReach(server: string): boolean {
    const outcomes = this.#round!.outcomes;
    return this.nodes.some((node, index) => outcomes[index]?.status !== 'refused' && (node.runId === undefined || node.runId === server));
  }

  #add(master: number, grant: HandOffMessage): boolean {
    const node = this.nodes[master];
    const refused = this.#round!.outcomes[master]?.status === 'refused';
    if (!node || !refused || this.#sentOn[master] !== node.connection || node.client.status !== 'ready') return false;
    if (grant.server !== node.runId || this.#servers.has(grant.server) || this.#deadlines.has(master)) return false;
    if (this.#cleanupMayReach(grant.server)) return false;
    this.#servers.add(grant.server);
    const spanMs = Math.max(0, grant.elapsed - 1) + this.ttlMs;
    this.#deadlines.set(master, this.#sentAt + validityMs(spanMs, 0, this.driftFactor));
    if (this.#deadlines.size < this.quorum) return false;
    // The best majority: the quorum-th latest deadline bounds the lock.
    const deadline = [...this.#deadlines.values()].sort((a, b) => b - a)[this.quorum - 1]!;
    if (deadline <= monotonicNow()) return false;
    this.#granted = { token: this.tokenFor(this.#anchor), deadline, round: this.#round!, masters: new Set(this.#deadlines.keys()) };
    return true;
  }
}
