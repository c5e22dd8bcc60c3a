import { SharedKind } from '../shared/shared-holds.js';

/**
 * Readers (`mode: 'read'`): any number hold a resource together, and none while a writer does.
 * They share the holders' protocol with permits; a reader's slot is `r`, never counted.
 */
export class ReadKind extends SharedKind {
  protected get scriptLimit(): number {
    return 0;
  }

  protected slotsOf(): undefined {
    return undefined;
  }

  protected slotArgs(_slots: readonly number[] | undefined, count: number): string[] {
    return Array.from({ length: count }, () => 'r');
  }
}
