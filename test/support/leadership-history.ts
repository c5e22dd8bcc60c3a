import type { LeaderEvent } from '../nest/support/leader-app.js';

/**
 * The leadership rule of the safety history checker, over what the replicas of leader-app.ts
 * reported (every `at` on the machine's one wall clock):
 * - terms rise strictly: each election won has a larger term than every one won before it;
 * - validity windows never overlap: a write of term T at `at`, made while its leader could still
 *   rely on the lease for `remainingMs` (or until it learnt that its leadership ended, if
 *   sooner), ends before any write of a later term begins;
 * - a deposed leader's writes are refused: once a later term's write was accepted, no write of
 *   an earlier term issued after it is accepted (the fenced store's answer).
 * Returns one line per violation (empty: the history is sound).
 */
export function leadershipViolations(events: readonly LeaderEvent[]): string[] {
  const violations: string[] = [];
  const elected = events.filter((event) => event.kind === 'elected').sort((a, b) => a.at - b.at);
  for (let i = 1; i < elected.length; i++) {
    const [before, after] = [elected[i - 1]!, elected[i]!];
    if (after.term <= before.term) violations.push(`term ${after.term} (${after.replica}) won after term ${before.term} (${before.replica}): terms must rise`);
  }
  // A leader stops relying on its lease when it learns that its leadership ended (it resigned, or
  // found it lost), whatever was left of it: its writes in flight then are the fence's to refuse.
  const endedAt = new Map<number, number>();
  for (const event of events) if (event.kind === 'ended') endedAt.set(event.term, event.at);
  const reliedUntil = (write: { term: number; at: number; remainingMs: number }) => Math.min(write.at + write.remainingMs, endedAt.get(write.term) ?? Infinity);
  const writes = events.filter((event): event is Extract<LeaderEvent, { kind: 'write' }> => event.kind === 'write').sort((a, b) => a.at - b.at);
  // Per term, its writes' latest believed end, and its first write: enough to compare every pair of terms.
  const terms = new Map<number, { replica: string; firstAt: number; believedUntil: number; lastAt: number }>();
  for (const write of writes) {
    const term = terms.get(write.term);
    const until = write.at + write.remainingMs;
    if (!term) terms.set(write.term, { replica: write.replica, firstAt: write.at, believedUntil: until, lastAt: write.at });
    else {
      term.believedUntil = Math.max(term.believedUntil, until);
      term.lastAt = write.at;
    }
  }
  const ordered = [...terms.entries()].sort(([a], [b]) => a - b);
  for (let i = 0; i < ordered.length; i++) {
    for (let j = i + 1; j < ordered.length; j++) {
      const [earlier, old] = ordered[i]!;
      const [later, next] = ordered[j]!;
      // Only writes of the earlier term made before the later one's first write bear on the overlap.
      const relied = writes.filter((w) => w.term === earlier && w.at <= next.firstAt).reduce((max, w) => Math.max(max, reliedUntil(w)), -Infinity);
      if (relied > next.firstAt) {
        violations.push(
          `term ${earlier} (${old.replica}) relied on its lease until ${relied - next.firstAt} ms after term ${later} (${next.replica}) first wrote`,
        );
      }
    }
  }
  let highestAccepted = -Infinity;
  for (const write of writes) {
    if (!write.accepted) continue;
    if (write.term < highestAccepted) violations.push(`a write of term ${write.term} (${write.replica}) was accepted after term ${highestAccepted}'s`);
    highestAccepted = Math.max(highestAccepted, write.term);
  }
  return violations;
}

/** Per leader change, how long from `since` (a kill, a stop, a resignation) to the next term's first write, in ms. */
export function takeoverMs(events: readonly LeaderEvent[], since: number, afterTerm: number): number | undefined {
  const first = events.filter((event) => event.kind === 'write' && event.term > afterTerm && event.at >= since).sort((a, b) => a.at - b.at)[0];
  return first && first.at - since;
}
