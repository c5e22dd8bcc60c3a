import { monotonicNow, validityMs } from '../base/clock.js';
import { CONFIRM_SCRIPT, confirmedPttl } from './queue-scripts.js';
import type { RoundResult } from '../rounds/quorum-round.js';
import type { RedisNode } from '../voters/redis-node.js';
import { newToken } from '../base/token.js';

/**
 * What asking a master about its message found: 'held', the lock is (a majority confirmed);
 * 'counted', this master's grant counts but more are needed; 'refuted', the key does not hold the
 * waiter's token (a forged or stale message: not even a reason to wake); 'not counted', the master
 * may have granted, but it cannot count (the rules below) or could not be asked.
 */
export type Confirmation = 'held' | 'counted' | 'refuted' | 'not counted';

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
 * token the waiter's request left in its entry, and says so by message. The message is only a
 * hint: any client that can read the queue and PUBLISH can forge one. The waiter then asks that
 * master itself (CONFIRM_SCRIPT: does the key hold my token, and for how long?), and only that
 * reply counts as the master's grant. It holds the lock once a majority granted it that way,
 * with validity left.
 *
 * Every request k of the waiter that can queue it carries its own token, `prefix` + k, and the
 * entry it writes names k (its anchor). (A first plain SET NX queues nobody: its token is its own.) The rules that keep the count honest:
 * - Only grants anchored at the latest request count. A later request takes over, with its own
 *   token, any key an earlier grant set (the acquire script treats the prefix as ours), so an
 *   older grant is either taken over and counted in that request's own round, or gone.
 * - Only masters that refused that request count: a master whose answer was a grant, an error or
 *   none in time gets the failed round's cleanup, which could delete a grant made before it
 *   lands. (A straggler's cleanup waits for its answer, and is not sent if that is a refusal: a
 *   grant from a master whose answer is still on its way counts once that answer is a refusal.)
 * - Only over the connection the request went out on, for the request and its confirmation: a
 *   master whose connection closed since may be another server (a restart), whose grant is no vote.
 * - Once per server, as that master's connection identified it: a server listed under two names
 *   grants once; and never from a server that the round's cleanup reaches under another name
 *   (see #cleanupMayReach).
 * - Validity comes from this waiter's clock alone: the confirmation left at `sentAt` and the
 *   master read the key's PTTL after that, so the key cannot expire before `sentAt + pttl`, less
 *   the usual drift allowance. Nothing the message says counts towards it.
 */
export class HandOffGrants {
  /** Every token of this waiter starts with it: random, so no other waiter's token can. */
  readonly prefix = `${newToken()}.`;
  #anchor = 0;
  /** The failed round of request #anchor, once decided. */
  #round: RoundResult | undefined;
  /** Per master, its connection when request #anchor went out. */
  #sentOn: number[] = [];
  /** Masters whose message for #anchor arrived before its round was decided. */
  #early: number[] = [];
  /** Masters asked about #anchor whose answer is still out: one question at a time, however many messages. */
  readonly #asking = new Set<number>();
  /** Per confirmed master, the deadline its grant allows. */
  readonly #deadlines = new Map<number, number>();
  /** The servers (run_id) counted. */
  readonly #servers = new Set<string>();
  #granted: HandOffGrant | undefined;
  /** Told of each question's verdict (see `granted`). */
  #onConfirmed: ((verdict: Confirmation, master: number) => void) | undefined;

  constructor(
    private readonly nodes: readonly RedisNode[],
    private readonly quorum: number,
    /** The lock key: hand-off is for single-key locks. */
    private readonly key: string,
    private readonly driftFactor: number,
  ) {}

  /** `confirmed` hears the verdict on each message `granted` answered 'later' for, once it is known. */
  whenConfirmed(confirmed: (verdict: Confirmation, master: number) => void): void {
    this.#onConfirmed = confirmed;
  }

  tokenFor(anchor: number): string {
    return this.prefix + anchor;
  }

  /** Request `anchor` is about to be sent: grants anchored earlier stop counting. */
  sending(anchor: number): void {
    this.#anchor = anchor;
    this.#sentOn = this.nodes.map((node) => node.connection);
    this.#round = undefined;
    this.#early = [];
    this.#asking.clear();
    this.#deadlines.clear();
    this.#servers.clear();
  }

  /** Request #anchor's round failed: the masters that refused it may now grant by hand-off. */
  failed(round: RoundResult): void {
    this.#round = round;
    const early = this.#early;
    this.#early = [];
    for (const master of early) if (this.#confirm(master) === 'no') this.#onConfirmed?.('not counted', master);
  }

  /**
   * The master of index `master` says (by the message its subscriber received) that it granted
   * request `anchor` by hand-off: 'held' if the lock already is, 'no' when that cannot count,
   * 'later' when the master is asked to confirm (then `whenConfirmed` hears the verdict).
   */
  granted(master: number, anchor: number): 'held' | 'no' | 'later' {
    if (this.#granted) return 'held';
    if (anchor !== this.#anchor) return 'no';
    if (!this.#round) {
      if (!this.#early.includes(master)) this.#early.push(master);
      return 'later';
    }
    return this.#confirm(master);
  }

  /** Some master is being asked whether it granted the request still counted. */
  get asking(): boolean {
    return this.#asking.size > 0;
  }

  /** The lock, once a majority granted it with validity left. */
  get lock(): HandOffGrant | undefined {
    return this.#granted;
  }

  #confirm(master: number): 'no' | 'later' {
    if (this.#deadlines.has(master) || !this.#mayCount(master)) return 'no';
    // Already asking: its answer covers this message too.
    if (this.#asking.has(master)) return 'later';
    this.#asking.add(master);
    const anchor = this.#anchor;
    const current = () => anchor === this.#anchor && !this.#granted;
    /** Only for the request still being counted: `verdict` is computed once that is known to hold. */
    const tell = (verdict: () => Confirmation) => {
      if (!current()) return;
      this.#asking.delete(master);
      this.#onConfirmed?.(verdict(), master);
    };
    const ask = () => {
      if (!current()) return;
      const sentAt = monotonicNow();
      this.nodes[master]!.run(CONFIRM_SCRIPT, [this.key], [this.tokenFor(anchor)]).then(
        (reply) =>
          tell(() => {
            let pttl: number | undefined;
            try {
              pttl = confirmedPttl(reply);
            } catch {
              return 'not counted'; // the master's reply is its own error: no grant
            }
            return pttl === undefined ? 'refuted' : this.#add(master, pttl, sentAt);
          }),
        () => tell(() => 'not counted'),
      );
    };
    // A straggler: only its answer says whether it refused (and so gets no cleanup).
    if (this.#round!.outcomes[master]?.status === 'pending') {
      const answered = () => {
        if (!current()) return;
        if (this.#mayCount(master)) ask();
        else tell(() => 'not counted');
      };
      void this.#round!.requests[master]?.then(answered, answered);
    } else {
      ask();
    }
    return 'later';
  }

  /** Whether a grant by this master could count: it refused request #anchor, over the connection that is still open. */
  #mayCount(master: number): boolean {
    const node = this.nodes[master];
    const status = this.#round?.outcomes[master]?.status;
    if (!node || (status !== 'refused' && status !== 'pending')) return false;
    return this.#sentOn[master] === node.connection && node.client.ready;
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

  /** Master `master` confirmed that the key holds our token for `pttl` more, asked at `sentAt`. */
  #add(master: number, pttl: number, sentAt: number): Confirmation {
    if (this.#round!.outcomes[master]?.status !== 'refused' || !this.#mayCount(master)) return 'not counted';
    const server = this.nodes[master]!.runId;
    if (server === undefined || this.#servers.has(server) || this.#cleanupMayReach(server)) return 'not counted';
    this.#servers.add(server);
    this.#deadlines.set(master, sentAt + validityMs(pttl, 0, this.driftFactor));
    if (this.#deadlines.size < this.quorum) return 'counted';
    // The best majority: the quorum-th latest deadline bounds the lock.
    const deadline = [...this.#deadlines.values()].sort((a, b) => b - a)[this.quorum - 1]!;
    if (deadline <= monotonicNow()) return 'counted';
    this.#granted = { token: this.tokenFor(this.#anchor), deadline, round: this.#round!, masters: new Set(this.#deadlines.keys()) };
    return 'held';
  }
}
