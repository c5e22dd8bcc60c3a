import type { LockKind } from '../../lock/lock-kind.js';
import type { KindParts } from '../hold-kind.js';
import { SHARED_CONTENDERS, SharedKind } from '../shared/shared-holds.js';

/**
 * Permits of a semaphore (`limit` > 1): at most `limit` holders of a resource at once, each in a
 * numbered slot that a majority of masters agreed on.
 */
export class PermitKind extends SharedKind {
  /** More callers of ours after a permit than there are permits could only be refused. */
  readonly width: number;

  constructor(parts: KindParts, kind: LockKind) {
    super(parts, kind);
    this.width = Math.min(kind.limit, SHARED_CONTENDERS);
  }

  protected get scriptLimit(): number {
    return this.kind.limit;
  }

  protected slotsOf(agreed: string): number[] {
    return agreed.split(' ').map(Number);
  }

  /** '' where no slot was agreed on: the release then drops our entry whatever its slot. */
  protected slotArgs(slots: readonly number[] | undefined, count: number): string[] {
    return Array.from({ length: count }, (_, i) => (slots?.[i] === undefined ? '' : String(slots[i])));
  }
}
