import { ms } from './history.js';
import type { Hold, Violation } from './checker.js';

/**
 * The invariants of readers and semaphores (docs/GUARANTEES.md, "Semaphores and read-write
 * locks"), on the same holds and windows as the lock's:
 * - `over-limit`: at no instant more than `limit` permits held in the windows of one resource,
 *   a weighted permit counting its weight;
 * - `writer-shared`: no writer's window intersects another holder's (a reader's or a writer's);
 * - `fence-order`: a holder's fence is above the fence of every holder whose acquire ended (ok)
 *   before this one's began (invoke). Concurrent readers or permits may share a value, so
 *   "successive holders" of a lock is not the rule here.
 */
export function checkSharedHolds(holds: readonly Hold[], out: Violation[]): void {
  const byResource = new Map<string, Hold[]>();
  for (const hold of holds) {
    if (hold.end <= hold.okAt) continue;
    let list = byResource.get(hold.resource);
    if (!list) byResource.set(hold.resource, (list = []));
    list.push(hold);
  }
  for (const [resource, list] of byResource) {
    checkWindows(resource, list, out);
    checkFences(resource, list, out);
  }
}

/** Whether `hold`'s resource has readers or permits anywhere in the history. */
export function isShared(hold: Hold, all: readonly Hold[]): boolean {
  return sharedResources(all).has(hold.resource);
}

const cache = new WeakMap<readonly Hold[], Set<string>>();
function sharedResources(all: readonly Hold[]): Set<string> {
  let set = cache.get(all);
  if (!set) {
    set = new Set(all.filter((h) => h.mode === 'read' || h.limit > 1).map((h) => h.resource));
    cache.set(all, set);
  }
  return set;
}

function who(hold: Hold): string {
  const kind = hold.limit > 1 ? (hold.permits > 1 ? `${hold.permits} permits of ${hold.limit}` : `permit of ${hold.limit}`) : hold.mode === 'read' ? 'reader' : 'writer';
  return `${kind} ${hold.proc}/${hold.worker} (fence ${hold.fence ?? '-'}, token ${hold.token.slice(0, 8)})`;
}

function checkWindows(resource: string, list: Hold[], out: Violation[]): void {
  list.sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0));
  const active: Hold[] = [];
  for (const hold of list) {
    // Windows that ended by now no longer count (an end equal to a start does not intersect it).
    for (let i = active.length - 1; i >= 0; i--) if (active[i]!.end <= hold.okAt) active.splice(i, 1);
    const writer = hold.mode === 'write' && hold.limit === 1;
    const otherWriter = active.find((h) => h.mode === 'write' && h.limit === 1);
    if ((writer && active.length > 0) || otherWriter) {
      const other = otherWriter ?? active[0]!;
      out.push({
        kind: 'writer-shared',
        resource,
        at: hold.okAt,
        message: `${who(hold)} got the resource while ${who(other)} could still rely on it for ${ms(other.end - hold.okAt).toFixed(1)} ms`,
      });
    }
    active.push(hold);
    if (hold.limit > 1) {
      const permits = active.filter((h) => h.limit > 1);
      const taken = permits.reduce((sum, h) => sum + h.permits, 0);
      if (taken > hold.limit) {
        const weighted = permits.some((h) => h.permits > 1);
        out.push({
          kind: 'over-limit',
          resource,
          at: hold.okAt,
          message: `${who(hold)} made ${weighted ? `${taken} permits held by ${permits.length} holders` : `${permits.length} holders`} at once, limit ${hold.limit}: ${permits.map(who).join(', ')}`,
        });
      }
    }
  }
}

function checkFences(resource: string, list: readonly Hold[], out: Violation[]): void {
  const fenced = list.filter((h) => h.fence !== undefined);
  const byOk = [...fenced].sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0));
  const byInvoke = fenced.filter((h) => h.invokedAt !== undefined).sort((a, b) => (a.invokedAt! < b.invokedAt! ? -1 : 1));
  let next = 0;
  let highest: Hold | undefined;
  for (const hold of byInvoke) {
    while (next < byOk.length && byOk[next]!.okAt < hold.invokedAt!) {
      const done = byOk[next++]!;
      if (!highest || done.fence! > highest.fence!) highest = done;
    }
    if (highest && highest !== hold && hold.fence! <= highest.fence!) {
      out.push({
        kind: 'fence-order',
        resource,
        at: hold.okAt,
        message: `${who(hold)} got fence ${hold.fence}, not above ${highest.fence} of ${who(highest)}, handed out before it began acquiring`,
      });
    }
  }
}
