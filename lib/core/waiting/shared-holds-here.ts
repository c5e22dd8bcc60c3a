/**
 * The lines (lineOf their keys) where this process holds readers or permits. A writer of this
 * process for such a line would only be refused by their marker, so one that waits goes straight
 * to the masters' queue instead of trying a plain SET NX first (ExclusiveKind.attempt): on a
 * read-mostly key that try costs every writer a round that cannot win, and its place in the queue
 * a round later. Only a choice of first try: a hold never given back (lost, and never released)
 * leaves its line counted, and that line's writers then take their first round by script.
 */
export class SharedHoldsHere {
  readonly #counts = new Map<string, number>();
  /** The holds counted: a release or hand-away of one never counted (adopted from a handle) takes nothing off. */
  readonly #counted = new WeakSet<object>();

  add(line: string, hold: object): void {
    if (this.#counted.has(hold)) return;
    this.#counted.add(hold);
    this.#counts.set(line, (this.#counts.get(line) ?? 0) + 1);
  }

  remove(line: string, hold: object): void {
    if (!this.#counted.delete(hold)) return;
    const left = this.#counts.get(line)! - 1;
    if (left === 0) this.#counts.delete(line);
    else this.#counts.set(line, left);
  }

  holds(line: string): boolean {
    return this.#counts.has(line);
  }
}
