/**
 * The demo's output and its verdict. Everything the report says is printed as the phases run;
 * `Verdict` collects what must make the demo exit non-zero: a wrong result on a protected path,
 * or a promise of the demo that did not hold (for example "3 of 5 masters down gives 503s").
 */
export class Verdict {
  readonly failures: string[] = [];

  /** Records `message` as a failure unless `ok`; returns `ok`. */
  expect(ok: boolean, message: string): boolean {
    if (!ok) this.failures.push(message);
    return ok;
  }

  get ok(): boolean {
    return this.failures.length === 0;
  }
}

export function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/**
 * Rows of cells as aligned columns. `align` has one letter per column, 'l' or 'r'; by default
 * the first column is left-aligned and the others (numbers) right-aligned.
 */
export function table(rows: readonly (readonly (string | number)[])[], { indent = '   ', align = '' } = {}): void {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, String(cell).length)));
  for (const row of rows) {
    const cells = row.map((cell, i) => {
      const left = (align[i] ?? (i === 0 ? 'l' : 'r')) === 'l';
      return left ? String(cell).padEnd(widths[i]!) : String(cell).padStart(widths[i]!);
    });
    say(`${indent}${cells.join('   ')}`.trimEnd());
  }
}

/** "10 × 201, 10 × 422 (insufficient funds)" */
export function describeStatuses(counts: Record<number, number>): string {
  const names: Record<number, string> = { 409: 'busy', 422: 'insufficient funds', 503: 'unavailable' };
  return Object.entries(counts)
    .map(([status, count]) => {
      if (status === '0') return `${count} × no answer`;
      const name = names[Number(status)];
      return `${count} × ${status}${name ? ` ${name}` : ''}`;
    })
    .join(', ');
}
