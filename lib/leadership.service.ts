import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Observable, Subject, filter } from 'rxjs';
import { Redlock } from './core/redlock.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import type { Election } from './core/election/election.js';
import type { LeaderInfo } from './core/election/leader-records.js';
import type { Leadership, LeadershipEnd } from './core/election/leadership.js';
import { errorText } from './core/voters/redis-node.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';
import { REDLOCK_SETTINGS, WHILE_LEADER } from './redlock.constants.js';
import { within } from './core/base/within.js';

/** What `LeadershipService.changes()` emits: this replica won an election, or a leadership of its ended. */
export interface LeadershipChange {
  /** `'elected'`: this replica won; `'ended'`: its leadership ended (see `reason`). */
  readonly kind: 'elected' | 'ended';
  /** The election's name. */
  readonly election: string;
  /** This replica's identity. */
  readonly identity: string;
  /** The term won, or the term that ended. */
  readonly term: number;
  /** For `'ended'`: `'resigned'` (by hand, a failed duty, or shutdown) or `'lost'`. */
  readonly reason?: LeadershipEnd['reason'];
  /** For a loss: why. */
  readonly error?: Error;
  /** For `'ended'`: how long it led, in ms. */
  readonly heldMs?: number;
}

/** The module's `logger` option (a RedlockLogger: `warn` at least), or Nest's Logger. */
type ModuleLogger = { warn(message: string): void; log?(message: string): void; error?(message: string): void };

/** A `@WhileLeader` method, bound to its instance. */
interface Duty {
  readonly site: string;
  readonly run: (signal: AbortSignal, leadership: Leadership) => unknown;
}

/**
 * Leader elections among the replicas: runs the `@WhileLeader` methods on the elected replica,
 * and answers "am I leader of X", "who leads X" and "tell me when that changes" for any provider.
 * Elections use the module's `leadership` options (identity, lease); a shutdown resigns every
 * leadership first, so a standby takes over within a round trip or two.
 */
@Injectable()
export class LeadershipService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  readonly #elections = new Map<string, Election>();
  readonly #changes = new Subject<LeadershipChange>();
  readonly #stop = new AbortController();
  readonly #serving: Promise<void>[] = [];
  /** The module's logger (Nest's `Redlock` logger unless the `logger` option says otherwise). */
  readonly #logger: ModuleLogger;

  /** @internal Nest constructs it: inject `LeadershipService` where leadership is needed. */
  constructor(
    @Inject(Redlock) private readonly engine: RedlockEngine,
    @Inject(REDLOCK_SETTINGS)
    private readonly settings: { readonly leadership: { readonly identity: string; readonly leaseMs: number }; readonly engine: { readonly logger?: object } },
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {
    this.#logger = (settings.engine.logger as ModuleLogger | undefined) ?? new Logger('Redlock');
  }

  /** What this replica campaigns as (the module's `leadership.identity`). */
  get identity(): string {
    return this.settings.leadership.identity;
  }

  /** Whether this replica leads `election` now. */
  isLeader(election: string): boolean {
    return this.leadership(election) !== undefined;
  }

  /** This replica's leadership of `election`, while it lasts. */
  leadership(election: string): Leadership | undefined {
    for (const leadership of this.#elections.get(election)?.held ?? []) if (leadership.isLeader) return leadership;
    return undefined;
  }

  /**
   * Who leads `election` now, whichever replica it is, as a majority of masters has it (a read:
   * nothing is written). Null while nobody leads. Rejects with QuorumUnreachableError when too few
   * masters answer.
   */
  leader(election: string): Promise<LeaderInfo | null> {
    return this.election(election).leader();
  }

  /** This replica's elections won and leaderships ended, of one election or of all. */
  changes(election?: string): Observable<LeadershipChange> {
    const all = this.#changes.asObservable();
    return election === undefined ? all : all.pipe(filter((change) => change.election === election));
  }

  /**
   * Campaigns by hand: resolves when this replica leads `election` (then resign it, or let the
   * shutdown do it). `@WhileLeader` methods are the usual way; this is for work that decides
   * itself when to stand.
   */
  campaign(election: string, options: { signal?: AbortSignal } = {}): Promise<Leadership> {
    return this.election(election).campaign(this.identity, options);
  }

  /** @internal The election of that name, with the module's lease: one per name. */
  election(name: string): Election {
    let election = this.#elections.get(name);
    if (!election) {
      election = this.engine.election(name, { leaseMs: this.settings.leadership.leaseMs });
      // The restart quarantine's window covers the lease from the first campaign on.
      this.engine.expectTtl(election.leaseMs);
      election.on('elected', (leadership: Leadership) => {
        this.#logger.log?.(`elected leader of ${name} as ${leadership.identity} (term ${leadership.term})`);
        this.#changes.next({ kind: 'elected', election: name, identity: leadership.identity, term: leadership.term });
      });
      election.on('ended', (end: LeadershipEnd) => {
        if (end.reason === 'lost') this.#logger.warn(`leadership of ${name} lost after ${end.heldMs} ms (term ${end.term}): ${errorText(end.error)}`);
        else this.#logger.log?.(`resigned the leadership of ${name} (term ${end.term})`);
        this.#changes.next({ ...end, kind: 'ended' });
      });
      this.#elections.set(name, election);
    }
    return election;
  }

  /** @internal Once the application is up: every replica campaigns for its `@WhileLeader` methods' elections. */
  onApplicationBootstrap(): void {
    const duties = new Map<string, Duty[]>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const method = instance[name];
        if (typeof method !== 'function') continue;
        const election = Reflect.getMetadata(WHILE_LEADER, method) as unknown;
        if (election === undefined) continue;
        const site = `${instance.constructor.name}.${name}`;
        if (typeof election !== 'string' || election.length === 0) {
          throw new RedlockConfigError(`@WhileLeader on ${site}: the election's name must be a non-empty string`);
        }
        if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
          throw new RedlockConfigError(`@WhileLeader on ${site}: the provider is request-scoped or transient, so no instance lives to lead`);
        }
        const list = duties.get(election) ?? [];
        list.push({ site, run: (signal, leadership) => (method as Function).call(instance, signal, leadership) });
        duties.set(election, list);
      }
    }
    for (const [election, list] of duties) this.#serving.push(this.#serve(election, list));
  }

  /** @internal Before the engine releases everything: campaigns stop, leaderships resign, duties settle. */
  async beforeApplicationShutdown(): Promise<void> {
    // The duties stop first and the leaderships are resigned after: no leader's work overlaps the
    // next leader's. A duty that ignores its signal is given one lease, then resigned under; the
    // fence is what refuses what it writes after that.
    this.#stop.abort(new Error('application shutdown'));
    const longestLease = Math.max(0, ...[...this.#elections.values()].map((election) => election.leaseMs));
    await within(Promise.all(this.#serving), longestLease, () => undefined);
    const leaderships = [...this.#elections.values()].flatMap((election) => [...election.held]);
    await Promise.all(leaderships.map((leadership) => leadership.resign()));
    this.#changes.complete();
  }

  #error(message: string): void {
    if (this.#logger.error) this.#logger.error(message);
    else this.#logger.warn(message);
  }

  /** Campaign, run the duties while leader, wait for them to settle once it ends; again, until shutdown. */
  async #serve(name: string, duties: readonly Duty[]): Promise<void> {
    const election = this.election(name);
    const stop = this.#stop.signal;
    while (!stop.aborted) {
      let leadership: Leadership;
      try {
        leadership = await election.campaign(this.identity, { signal: stop });
      } catch (error) {
        if (stop.aborted) return;
        this.#error(`campaign for ${name} failed: ${errorText(error)}`);
        await sleep(election.leaseMs, undefined, { signal: stop }).catch(() => {});
        continue;
      }
      let failed = false;
      // Aborts when the leadership ends, or at shutdown (before the leadership is resigned).
      const signal = AbortSignal.any([leadership.signal, stop]);
      const runs = duties.map(async (duty) => {
        try {
          await duty.run(signal, leadership);
        } catch (error) {
          // Cancelled by the end of the leadership: that is how a duty stops, not a failure.
          if (signal.aborted) return;
          failed = true;
          this.#error(`${duty.site} failed while leading ${name}; resigning: ${errorText(error)}`);
          await leadership.resign();
        }
      });
      if (!signal.aborted) await once(signal, 'abort');
      await Promise.all(runs);
      if (stop.aborted) {
        await leadership.resign();
        return;
      }
      // A duty that fails at once would otherwise be elected and fail again in a loop.
      if (failed) await sleep(election.leaseMs, undefined, { signal: stop }).catch(() => {});
    }
  }
}
