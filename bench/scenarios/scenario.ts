import type { LibraryId } from '../adapters/index.js';

/** One column of a scenario's table. */
export interface Metric {
  readonly key: string;
  readonly label: string;
  /** Which way is better, for "best peer" and the ratios. */
  readonly better: 'lower' | 'higher';
  readonly digits: number;
  /** Shown but not compared with the peers (counts, sanity checks). */
  readonly informational?: boolean;
}

export type Figures = Record<string, number>;

export interface ScenarioContext<P> {
  readonly library: LibraryId;
  readonly urls: readonly string[];
  /** A Redis apart from the masters, for critical sections that read and write a store. */
  readonly storeUrl?: string;
  readonly params: P;
}

/**
 * A scenario is written once against LockAdapter and run by bench/child.ts, one fresh
 * process per library and repetition, so no library inherits another's heap or JIT state.
 */
export interface Scenario<P = any> {
  readonly id: string;
  readonly title: string;
  /** How it is measured, for RESULTS.md. */
  readonly method: (params: P) => string;
  /** Default: every library. */
  readonly libraries?: readonly LibraryId[];
  /** With the limit among the libraries: the figure (a count or rate) every library is shown as a share of the limit's. */
  readonly limitMetric?: string;
  readonly metrics: readonly Metric[];
  /** Lines after the table that explain its figures from the medians (a model, checked against them). */
  readonly explain?: (median: (library: LibraryId, key: string) => number) => string[];
  readonly params: { readonly full: P; readonly smoke: P };
  run(context: ScenarioContext<P>): Promise<Figures>;
}
