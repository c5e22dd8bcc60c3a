import type { Attributes, ObservableResult } from '@opentelemetry/api';
import { ATTR_REDLOCK_RESOURCES } from './telemetry.constants.js';

interface Entry {
  readonly attributes: Attributes;
  count: number;
}

/**
 * How many of something are alive now (locks held, callers waiting), kept as a plain number and
 * read by an observable instrument at collection time: a change costs an addition, not a
 * measurement. Per resource set when resource attributes are on.
 */
export class LiveCount {
  #total = 0;
  readonly #byResources: Map<string, Entry> | undefined;

  constructor(perResource: boolean) {
    if (perResource) this.#byResources = new Map();
  }

  add(delta: number, resources: readonly string[] | undefined): void {
    if (!this.#byResources || !resources) {
      this.#total += delta;
      return;
    }
    const key = resources.join('\n');
    let entry = this.#byResources.get(key);
    if (!entry) {
      entry = { attributes: { [ATTR_REDLOCK_RESOURCES]: [...resources] }, count: 0 };
      this.#byResources.set(key, entry);
    }
    entry.count += delta;
  }

  observe(result: ObservableResult): void {
    if (!this.#byResources) {
      result.observe(this.#total);
      return;
    }
    for (const [key, entry] of this.#byResources) {
      result.observe(entry.count, entry.attributes);
      // Reported at zero once, then forgotten: resource names must not pile up in memory.
      if (entry.count === 0) this.#byResources.delete(key);
    }
  }
}
