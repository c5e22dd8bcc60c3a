import { HANDED_OVER, type Lock, type ReleaseResult } from '../lock/lock.js';
import type { HeldBy, KindParts } from './hold-kind.js';

/**
 * The release of a kind that passes holds on within a process (locks, permits): to the caller of
 * this process asleep on `line`, if LocalHandOver's rules allow, else `free` on the masters, after
 * which the next caller of this process asleep there tries at once (unless the masters queue it
 * and will name it: see LocalHandOver.wakeNext).
 * `keep`: what the new holder's queue entries leave behind (see QueueEntries.leave).
 */
export async function handOverOrFree(
  parts: KindParts,
  lock: Lock,
  held: HeldBy | undefined,
  line: string,
  keep: string,
  free: () => Promise<ReleaseResult>,
): Promise<ReleaseResult> {
  const { handOver, entries } = parts;
  const passed = held && handOver.offer(lock, line);
  if (passed) {
    parts.held(passed.handed, held.round, passed.to, false);
    // The new holder's entries, if it queued on the masters, go now (the old holder's went when
    // its hold began). They would head their queues all through its hold: a master freeing the
    // key would reserve it for them, or grant it by hand-off, and nobody would come (its wait is
    // over); until its release, and then until the reservation lapsed (a second), or the grant
    // (the ttl), since a release frees only its own token. Keys granted to them go on.
    if (passed.to.enlisted) entries.leave(lock.resources, passed.to, keep);
    // The masters were not asked.
    return HANDED_OVER;
  }
  handOver.released(lock, line);
  const result = await free();
  handOver.wakeNext(line, parts.handsOff);
  return result;
}

/**
 * A hold of a kind that passes holds on within a process, handed to another process: nobody here
 * gets it, the masters keep it, and the next caller of this process asleep on `line` goes to ask
 * (unless the masters queue it and will name it).
 */
export function handAwayFrom(parts: KindParts, lock: Lock, line: string): void {
  parts.handOver.released(lock, line);
  parts.handOver.wakeNext(line, parts.handsOff);
}
