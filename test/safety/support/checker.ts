import { ms, nsFromMs, type HistoryEvent } from './history.js';
import { checkSharedHolds, isShared } from './shared-holds-check.js';

/**
 * Verifies a safety run's history. Pure: the same history always gives the same verdict.
 *
 * 1. `overlap`: no two holders' validity windows on one resource intersect. A holder's window is
 *    [acquire ok, min(validUntil as last stated, release invoked)]: from when the caller learnt it
 *    holds the lock to when the lock stopped promising anything or the caller stopped relying on
 *    it. validUntil is stated by the acquire, then by every extend, ok or failed, and the last
 *    statement stands even when it is shorter: an extend with a shorter ttl, whatever its
 *    verdict, may have shortened the keys' lives on the masters. Redlock promises exactly this
 *    (the next holder's grant needs our key gone from a master of every majority, which happens
 *    after our deadline), so any intersection is a double grant, whatever the clocks of the
 *    workers, which share one.
 * 2. `lost-update`: the store's unfenced counter, read-modify-written under the lock only, never
 *    skips: each write stores the value before it plus one, and the final value equals the number
 *    of writes. `lost-update-fenced`: the same for the fenced counter and its accepted writes.
 *    An unfenced lock's operations (no fence) touch only the unfenced counter.
 * 3. `fence-order`: successive holders of a resource (ordered by acquire ok, windows not empty)
 *    got strictly increasing fencing tokens. `stale-accepted`: the store never accepted an
 *    operation whose fence was below one it had accepted before (or equal, from another holder):
 *    a stale holder's late write is rejected.
 * 4. For readers and semaphores (shared-holds-check.ts): `over-limit`, more than `limit` permit
 *    windows at once; `writer-shared`, a writer's window with any other holder's; and fences
 *    rising over every holder whose lock was handed out before this one's acquire began.
 * Plus the validity rule: `no-validity`, a lock handed out whose validity had already run out;
 * `validity-excess`, a single-round acquire that promised more than ttl - drift - elapsed (one
 * that joined a hold of its process, with no round of its own, more than the hold's members had
 * claimed), or
 * an extend (ok or failed) after which the lock claimed more than its new ttl - drift from the
 * moment the call returned: a master may drop the key that early.
 */

export type ViolationKind =
  | 'overlap'
  | 'lost-update'
  | 'lost-update-fenced'
  | 'fence-order'
  | 'stale-accepted'
  | 'no-validity'
  | 'validity-excess'
  | 'over-limit'
  | 'writer-shared';

export const VIOLATION_KINDS: readonly ViolationKind[] = [
  'overlap',
  'lost-update',
  'lost-update-fenced',
  'fence-order',
  'stale-accepted',
  'no-validity',
  'validity-excess',
  'over-limit',
  'writer-shared',
];

export interface Violation {
  readonly kind: ViolationKind;
  readonly resource: string;
  readonly at: bigint;
  readonly message: string;
}

/** One successful acquisition and the window in which its holder could rely on it. */
export interface Hold {
  readonly token: string;
  readonly proc: string;
  readonly worker: number;
  readonly resource: string;
  readonly fence: number | undefined;
  /** `'read'` for a reader; the exclusive lock and permits are `'write'`. */
  readonly mode: 'read' | 'write';
  /** How many holders the resource admits: a semaphore's limit, else 1. */
  readonly limit: number;
  /** How many of the limit's permits the hold takes (a weighted permit), else 1. */
  readonly permits: number;
  readonly invokedAt: bigint | undefined;
  readonly okAt: bigint;
  /** The validUntil stated last, by the acquire or an extend (ok or failed). */
  readonly validUntil: bigint;
  readonly releasedAt: bigint | undefined;
  /** Window end: validUntil, or the release call if earlier. */
  readonly end: bigint;
}

export interface CheckResult {
  readonly ok: boolean;
  readonly violations: Violation[];
  readonly counts: Record<ViolationKind, number>;
  readonly holds: Hold[];
  readonly stats: {
    /** Successful acquisitions. */
    readonly holds: number;
    readonly acquireFailures: number;
    readonly writesAccepted: number;
    readonly writesRejected: number;
    readonly plainWrites: number;
  };
}

/**
 * What the validity rule allows by default beyond the engine's own timing of a round (the worker
 * records it from the engine's observer: see worker.ts). That timing brackets the round within a
 * few lines of code, but a process preempted on a loaded 2-core machine loses tens of ms even
 * there (65 ms seen beside a second copy of the suite, which looks like twice that in excess). A
 * promise that ignored a round through the latency scenario's 200 ms delays (400 ms and more) is
 * still caught.
 */
export const VALIDITY_SLACK_MS = 250;

export interface CheckOptions {
  /**
   * Scheduling noise allowed in the validity-excess check, between the engine's clock reads and
   * the worker's: a promise that ignored the round's elapsed time is off by the whole round.
   * Default VALIDITY_SLACK_MS.
   */
  readonly validitySlackMs?: number;
}

const byTime = (a: { t: bigint }, b: { t: bigint }) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0);

export function checkHistory(history: readonly HistoryEvent[], options: CheckOptions = {}): CheckResult {
  const events = [...history].sort(byTime);
  const violations: Violation[] = [];
  const holds = buildHolds(events);

  checkValidity(events, holds, options.validitySlackMs ?? VALIDITY_SLACK_MS, violations);
  checkExtensions(events, violations);
  // Resources with readers or permits are judged by their own rules; the others as locks.
  checkOverlaps(holds.filter((h) => !isShared(h, holds)), violations);
  checkFenceOrder(holds.filter((h) => !isShared(h, holds)), violations);
  checkSharedHolds(holds.filter((h) => isShared(h, holds)), violations);
  const storeStats = checkStore(events, violations);

  violations.sort(byAt);
  const counts = Object.fromEntries(VIOLATION_KINDS.map((kind) => [kind, 0])) as Record<ViolationKind, number>;
  for (const violation of violations) counts[violation.kind]++;
  return {
    ok: violations.length === 0,
    violations,
    counts,
    holds,
    stats: {
      holds: holds.length,
      acquireFailures: events.filter((e) => e.op === 'acquire' && (e.phase === 'fail' || e.phase === 'unknown')).length,
      ...storeStats,
    },
  };
}

function byAt(a: Violation, b: Violation): number {
  return a.at < b.at ? -1 : a.at > b.at ? 1 : 0;
}

/**
 * Whose hold an event is about: readers of one process may share one token (a reader joins a hold
 * another reader of its process has), so a token alone does not name a hold. A worker runs one
 * cycle at a time, so its worker and the token do: its holds of one token follow one another.
 */
function holderKey(event: HistoryEvent): string {
  return `${event.proc}\n${event.worker}\n${event.token}`;
}

type Draft = { ok: HistoryEvent; invoke: HistoryEvent | undefined; validUntil: bigint; releasedAt?: bigint };

function buildHolds(events: readonly HistoryEvent[]): Hold[] {
  const invokes = new Map<string, HistoryEvent>();
  const drafts = new Map<string, Draft>();
  const done: Draft[] = [];
  for (const event of events) {
    if (event.op === 'acquire' && event.phase === 'invoke' && event.id) invokes.set(event.id, event);
    if (event.op === 'acquire' && event.phase === 'ok') {
      if (!event.token || event.validUntil === undefined || !event.resource) {
        throw new Error(`acquire ok without token, validUntil or resource: ${describe(event)}`);
      }
      const invoke = event.id ? invokes.get(event.id) : undefined;
      const earlier = drafts.get(holderKey(event));
      if (earlier) done.push(earlier);
      drafts.set(holderKey(event), { ok: event, invoke, validUntil: event.validUntil });
    }
    if (event.op === 'extend' && (event.phase === 'ok' || event.phase === 'fail') && event.token && event.validUntil !== undefined) {
      const draft = drafts.get(holderKey(event));
      if (draft) draft.validUntil = event.validUntil;
    }
    if (event.op === 'release' && event.phase === 'invoke' && event.token) {
      const draft = drafts.get(holderKey(event));
      if (draft && draft.releasedAt === undefined) draft.releasedAt = event.t;
    }
  }
  return [...done, ...drafts.values()].map(({ ok, invoke, validUntil, releasedAt }) => ({
    token: ok.token!,
    proc: ok.proc,
    worker: ok.worker,
    resource: ok.resource!,
    fence: ok.fence,
    mode: ok.mode ?? 'write',
    limit: ok.limit ?? 1,
    permits: ok.permits ?? 1,
    invokedAt: invoke?.t,
    okAt: ok.t,
    validUntil,
    releasedAt,
    end: releasedAt !== undefined && releasedAt < validUntil ? releasedAt : validUntil,
  }));
}

const hasWindow = (hold: Hold) => hold.end > hold.okAt;

function holder(hold: Hold): string {
  return `${hold.proc}/${hold.worker} (fence ${hold.fence ?? '-'}, token ${hold.token.slice(0, 8)})`;
}

function checkValidity(events: readonly HistoryEvent[], holds: readonly Hold[], slackMs: number, out: Violation[]): void {
  const okEvents = new Map(events.filter((e) => e.op === 'acquire' && e.phase === 'ok').map((e) => [`${holderKey(e)}\n${e.t}`, e]));
  for (const hold of holds) {
    // What the acquire itself promised: extends after it are judged by checkExtensions.
    const ok = okEvents.get(`${hold.proc}\n${hold.worker}\n${hold.token}\n${hold.okAt}`)!;
    const granted = ok.validUntil!;
    // Judged at the engine's grant where the worker has it: a worker descheduled after the call
    // may hold a lock that ran out meanwhile, which the engine did not hand out so.
    const handedOutAt = ok.engineStartedAt !== undefined && ok.engineMs !== undefined ? ok.engineStartedAt + nsFromMs(ok.engineMs) : hold.okAt;
    if (granted <= handedOutAt) {
      // (remainingMs() stops at 0, so how long ago it ran out is not known: no excess check either.)
      out.push({
        kind: 'no-validity',
        resource: hold.resource,
        at: hold.okAt,
        message: `${holder(hold)} was handed a lock whose validity had already run out`,
      });
      continue;
    }
    if (!ok.single || hold.invokedAt === undefined || ok.ttl === undefined) continue;
    // No round of its own, and another call of its process holds its token: the call joined that
    // hold (readers of one process share one). It may promise no more than the hold's members had
    // claimed. (A call with no other member is judged as one round, the whole call its round.)
    const joined = ok.engineStartedAt !== undefined && ok.engineRoundMs === undefined ? heldByOthers(events, ok) : undefined;
    if (joined !== undefined) {
      if (granted > joined + nsFromMs(slackMs)) {
        out.push({
          kind: 'validity-excess',
          resource: hold.resource,
          at: hold.okAt,
          message: `${holder(hold)}: joined a hold of its process and promised validity ${ms(granted - joined).toFixed(1)} ms past what its members had claimed`,
        });
      }
      continue;
    }
    // validUntil = start + ttl - (end - start) - drift. By the engine's own timing of the round
    // where the worker has it: the call ended a few microseconds after the round was decided, so
    // the round began its own duration before. Else by the call's (a process descheduled between
    // the call's start and its round's makes an honest promise look too long by twice the gap);
    // else with invoke <= start and end <= ok, which a descheduled worker stretches.
    const drift = Math.round(ok.ttl * (ok.driftFactor ?? 0.01)) + 2;
    const timed = ok.engineStartedAt !== undefined && ok.engineMs !== undefined;
    const roundMs = timed ? (ok.engineRoundMs ?? ok.engineMs!) : undefined;
    const startedAt = timed ? ok.engineStartedAt! + nsFromMs(ok.engineMs! - roundMs!) : hold.invokedAt;
    const elapsed = roundMs !== undefined ? nsFromMs(roundMs) : hold.okAt - hold.invokedAt;
    const bound = startedAt + nsFromMs(ok.ttl - drift) - elapsed + nsFromMs(slackMs);
    if (granted > bound) {
      out.push({
        kind: 'validity-excess',
        resource: hold.resource,
        at: hold.okAt,
        message:
          `${holder(hold)}: a ${ok.ttl} ms lock taken in ${ms(elapsed).toFixed(1)} ms promised validity until ` +
          `${ms(granted - startedAt).toFixed(1)} ms after the ${timed ? 'round began in the engine' : 'call'}, more than ttl - drift - elapsed allows`,
      });
    }
  }
}

/**
 * The longest validity the other members of `joined`'s hold (its process, its token) had claimed
 * by the time it joined: their acquires' (each made before a member could join it, whenever its
 * worker recorded it), and their extends' recorded before the join's. Undefined if it has none.
 */
function heldByOthers(events: readonly HistoryEvent[], joined: HistoryEvent): bigint | undefined {
  let longest: bigint | undefined;
  for (const event of events) {
    if (event === joined || event.proc !== joined.proc || event.token !== joined.token) continue;
    if (event.validUntil === undefined) continue;
    const claims = (event.op === 'acquire' && event.phase === 'ok') || (event.op === 'extend' && event.t < joined.t);
    if (claims && (longest === undefined || event.validUntil > longest)) longest = event.validUntil;
  }
  return longest;
}

/**
 * A master may have applied an extend of ttl as soon as the call began, and then drops the key
 * ttl later: whatever the round's verdict, the lock may claim at most start + ttl - drift. The
 * call began before its ok / fail event at `t`, so a claim beyond t + ttl - drift is surely too
 * long (loose by the call's own duration, so that scheduling noise cannot trip it). The old
 * deadline kept after a failed extend with a shorter ttl is the case this catches.
 */
function checkExtensions(events: readonly HistoryEvent[], out: Violation[]): void {
  const driftFactors = new Map<string, number>();
  const ttls = new Map<string, number>();
  for (const event of events) {
    if (event.op === 'acquire' && event.phase === 'ok' && event.token) driftFactors.set(event.token, event.driftFactor ?? 0.01);
    if (event.op !== 'extend' || !event.id) continue;
    if (event.phase === 'invoke' && event.ttl !== undefined) ttls.set(event.id, event.ttl);
    if ((event.phase !== 'ok' && event.phase !== 'fail') || event.validUntil === undefined || !event.token) continue;
    const ttl = ttls.get(event.id);
    if (ttl === undefined) continue;
    const drift = Math.round(ttl * (driftFactors.get(event.token) ?? 0.01)) + 2;
    const bound = event.t + nsFromMs(ttl - drift);
    // A deadline already behind the event claims nothing (a lost lock says only "over by now").
    if (event.validUntil > event.t && event.validUntil > bound) {
      out.push({
        kind: 'validity-excess',
        resource: event.resource ?? '',
        at: event.t,
        message:
          `${event.proc}/${event.worker} (token ${event.token.slice(0, 8)}): after ${event.phase === 'ok' ? 'an' : 'a failed'} extend ` +
          `with ttl ${ttl} ms the lock still claimed ${ms(event.validUntil - event.t).toFixed(1)} ms, more than ttl - drift allows` +
          (event.code ? ` (${event.code})` : ''),
      });
    }
  }
}

function checkOverlaps(holds: readonly Hold[], out: Violation[]): void {
  for (const [resource, list] of groupBy(holds.filter(hasWindow), (h) => h.resource)) {
    list.sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0));
    let reach: Hold | undefined; // the window, among those started so far, that ends last
    for (const hold of list) {
      if (reach && hold.okAt < reach.end) {
        out.push({
          kind: 'overlap',
          resource,
          at: hold.okAt,
          message:
            `${holder(hold)} got the lock while ${holder(reach)} could still rely on it for ` +
            `${ms(reach.end - hold.okAt).toFixed(1)} ms`,
        });
      }
      if (!reach || hold.end > reach.end) reach = hold;
    }
  }
}

function checkFenceOrder(holds: readonly Hold[], out: Violation[]): void {
  const fenced = holds.filter((h) => hasWindow(h) && h.fence !== undefined);
  for (const [resource, list] of groupBy(fenced, (h) => h.resource)) {
    list.sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0));
    for (let i = 1; i < list.length; i++) {
      const [before, after] = [list[i - 1]!, list[i]!];
      if (after.fence! <= before.fence!) {
        out.push({
          kind: 'fence-order',
          resource,
          at: after.okAt,
          message: `${holder(after)} got fence ${after.fence}, not above ${before.fence} of the holder before it, ${holder(before)}`,
        });
      }
    }
  }
}

function checkStore(events: readonly HistoryEvent[], out: Violation[]) {
  const ops = events.filter((e) => e.op === 'store-read' || e.op === 'store-write');
  let writesAccepted = 0;
  let writesRejected = 0;
  let plainWrites = 0;
  for (const [resource, list] of groupBy(ops, (e) => e.resource ?? '')) {
    list.sort((a, b) => a.seq! - b.seq!);
    let maxFence = Number.NEGATIVE_INFINITY;
    let maxToken: string | undefined;
    let value = 0;
    let plain = 0;
    let accepted = 0;
    let plainCount = 0;
    let chainBroken = false;
    for (const op of list) {
      // An unfenced lock's operation: only the plain counter is its.
      const fenced = op.fence !== undefined;
      if (op.accepted && fenced) {
        const stale = op.fence! < maxFence || (op.fence === maxFence && op.token !== maxToken);
        if (stale) {
          out.push({
            kind: 'stale-accepted',
            resource,
            at: op.t,
            message: `the store accepted a ${op.op === 'store-read' ? 'read' : 'write'} with fence ${op.fence} after fence ${maxFence}`,
          });
        }
        if (op.fence! > maxFence) {
          maxFence = op.fence!;
          maxToken = op.token;
        }
      }
      if (op.op !== 'store-write') continue;
      if (fenced && op.accepted) {
        writesAccepted++;
        accepted++;
        if (op.value !== value + 1) {
          chainBroken = true;
          out.push({
            kind: 'lost-update-fenced',
            resource,
            at: op.t,
            message: `an accepted write (fence ${op.fence}) stored ${op.value} over ${value}: an update was lost`,
          });
        }
        value = op.value!;
      } else if (fenced) {
        writesRejected++;
      }
      if (op.plain !== undefined) {
        plainWrites++;
        plainCount++;
        if (op.plain !== plain + 1) {
          chainBroken = true;
          out.push({
            kind: 'lost-update',
            resource,
            at: op.t,
            message: `a write under the lock (token ${op.token?.slice(0, 8)}) stored ${op.plain} over ${plain}: an update was lost`,
          });
        }
        plain = op.plain;
      }
    }
    const final = events.find((e) => e.op === 'final' && e.resource === resource);
    if (final && !chainBroken && (final.value !== accepted || final.plain !== plainCount)) {
      out.push({
        kind: final.plain !== plainCount ? 'lost-update' : 'lost-update-fenced',
        resource,
        at: final.t,
        message: `final values ${final.value} / ${final.plain} after ${accepted} accepted writes / ${plainCount} writes under the lock`,
      });
    }
  }
  return { writesAccepted, writesRejected, plainWrites };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    let list = groups.get(k);
    if (!list) groups.set(k, (list = []));
    list.push(item);
  }
  return groups;
}

function describe(event: HistoryEvent): string {
  return JSON.stringify(event, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

/** A few lines a human can act on: counts per kind and the first violations. */
export function summarize(result: CheckResult, limit = 5): string {
  const kinds = VIOLATION_KINDS.filter((k) => result.counts[k] > 0).map((k) => `${k}: ${result.counts[k]}`);
  const head = `${result.stats.holds} holds, ${result.violations.length} violations${kinds.length ? ` (${kinds.join(', ')})` : ''}`;
  return [head, ...result.violations.slice(0, limit).map((v) => `  [${v.kind}] ${v.resource}: ${v.message}`)].join('\n');
}
