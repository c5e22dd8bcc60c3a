/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function ascending(values: Iterable<number>): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Median of the repetitions; NaN values (a figure a run could not produce) are ignored. */
export function median(values: readonly number[]): number {
  const sorted = ascending(values.filter((value) => !Number.isNaN(value)));
  if (sorted.length === 0) return Number.NaN;
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** Least-squares line through the points: y ≈ intercept + slope × x; r2 = share of the variance it explains. */
export function linearFit(xs: readonly number[], ys: readonly number[]): { intercept: number; slope: number; r2: number } {
  const mx = mean(xs);
  const my = mean(ys);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  xs.forEach((x, i) => {
    sxy += (x - mx) * (ys[i]! - my);
    sxx += (x - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  });
  const slope = sxy / sxx;
  return { intercept: my - slope * mx, slope, r2: syy === 0 ? 1 : (sxy * sxy) / (sxx * syy) };
}
