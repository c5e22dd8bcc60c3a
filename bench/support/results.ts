import type { LibraryId } from '../adapters/index.js';
import type { Figures } from '../scenarios/scenario.js';
import { median } from './stats.js';

/** Every repetition's figures, per scenario and library, and the medians the report shows. */
export class Results {
  readonly #runs = new Map<string, Map<LibraryId, Figures[]>>();
  readonly failures: string[] = [];

  add(scenario: string, library: LibraryId, figures: Figures): void {
    const byLibrary = this.#runs.get(scenario) ?? new Map<LibraryId, Figures[]>();
    this.#runs.set(scenario, byLibrary);
    byLibrary.set(library, [...(byLibrary.get(library) ?? []), figures]);
  }

  libraries(scenario: string): LibraryId[] {
    return [...(this.#runs.get(scenario)?.keys() ?? [])];
  }

  repetitions(scenario: string, library: LibraryId): number {
    return this.#runs.get(scenario)?.get(library)?.length ?? 0;
  }

  /** Median over the repetitions; NaN when the library never produced the figure. */
  median(scenario: string, library: LibraryId, metric: string): number {
    const runs = this.#runs.get(scenario)?.get(library) ?? [];
    return median(runs.map((figures) => figures[metric] ?? Number.NaN));
  }

  /** The largest over the repetitions (a bound that one repetition breaking is enough to break); NaN when never produced. */
  max(scenario: string, library: LibraryId, metric: string): number {
    const values = this.values(scenario, library, metric).filter((value) => !Number.isNaN(value));
    return values.length === 0 ? Number.NaN : Math.max(...values);
  }

  /** Every repetition's value, for the raw figures at the end of the report. */
  values(scenario: string, library: LibraryId, metric: string): number[] {
    return (this.#runs.get(scenario)?.get(library) ?? []).map((figures) => figures[metric] ?? Number.NaN);
  }
}
