import { describe, expect, it } from 'vitest';
import { chartsDirFor, imageLink, IMAGE_LINE, renderSvg, scenarioBarChart, specOf } from '../../bench/support/charts.js';
import { hotKeyChart, LIMIT_CURVE } from '../../bench/support/scaling-charts.js';

/** The text of every <text> element, entities decoded. */
function texts(svg: string): string[] {
  return [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((match) => match[1]!.replace(/&amp;/g, '&').replace(/&#39;|&apos;/g, "'"));
}

/** The elements drawn inside the mark group whose class contains `cls`. */
function marks(svg: string, cls: RegExp, element: string): number {
  return [...svg.matchAll(new RegExp(`<g class="${cls.source}"[^>]*>(.*?)</g>`, 'g'))].reduce(
    (sum, match) => sum + (match[1]!.match(new RegExp(`<${element}\\b`, 'g'))?.length ?? 0),
    0,
  );
}

// The chart path of bench/run.ts and bench/scaling.ts (and npm run bench:charts): headless Vega-Lite to SVG, no Redis.
describe('bench charts', () => {
  it('draws a scenario as bars per library, whiskers over the repetitions and the limit as a dashed line', async () => {
    const chart = scenarioBarChart({
      scenarioId: 'hot-key-store',
      sectionTitle: "3a. Hot key with store round trips (issue 17's workload)",
      source: 'npm run bench, 2026-11-26 02:12 UTC, full run',
      reps: 2,
      rows: [
        { library: 'nestjs-redlock', ours: true, limit: false, median: 285, values: [302, 268] },
        { library: 'redlock', ours: false, limit: false, median: 11, values: [14, 8] },
        { library: 'redis-semaphore (RedlockMutex)', ours: false, limit: false, median: 203, values: [175, 232] },
        { library: 'the limit: a perfect in-process FIFO mutex', ours: false, limit: true, median: 380, values: [370, 389] },
      ],
    })!;
    const svg = await renderSvg(specOf(chart));

    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]* width="\d+" height="\d+"/);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    const words = texts(svg);
    expect(words).toContain("Scenario 3a: Hot key with store round trips (issue 17's workload)");
    expect(words).toEqual(expect.arrayContaining(['nestjs-redlock', 'redlock', 'redis-semaphore (RedlockMutex)', '285/s', '11/s', '203/s', 'holds/s']));
    expect(words).toContain('the limit (perfect in-process mutex): 380/s');
    expect(svg).toContain('npm run bench, 2026-11-26 02:12 UTC, full run; median of 2 repetitions');
    // Three bars (the limit is a line, not a bar), ours in its own colour, one dashed rule for the limit.
    expect(marks(svg, /mark-rect role-mark layer_0_marks/, 'path')).toBe(3);
    expect(svg.match(/fill="#d62728"/g)).toHaveLength(1);
    expect(svg).toMatch(/<g class="mark-rule role-mark layer_3_marks"[^>]*><line [^>]*stroke-dasharray="5,3"/);
  });

  it('draws a sweep as one line per library, the limit dashed, with a legend', async () => {
    const points = (ys: number[]) => ys.map((y, i) => ({ x: [1, 2, 4, 8][i]!, y }));
    const chart = hotKeyChart(0.5, { when: '2026-11-25 13:15', mode: 'full', reps: 2 }, [
      { name: 'nestjs-redlock', ours: true, points: points([204, 199, 197, 189]) },
      { name: 'redis-semaphore (RedlockMutex)', points: points([149, 126, 77, 20]) },
      { name: LIMIT_CURVE, reference: true, points: points([255, 245, 255, 258]) },
    ]);
    const svg = await renderSvg(specOf(chart));

    expect(chart.name).toBe('scaling-hot-key-rtt-0.5ms');
    const words = texts(svg);
    expect(words).toContain("Hot key (scenario 3a's workload) against the number of processes, round trip 0.5 ms");
    expect(words).toEqual(expect.arrayContaining(['nestjs-redlock', 'redis-semaphore (RedlockMutex)', LIMIT_CURVE, 'processes', 'holds/s', '1', '2', '4', '8']));
    expect(svg).toContain('npm run bench:scaling, 2026-11-25 13:15 UTC, full run, median of 2 repetitions');
    // Three series in the first line layer (ours drawn again on top), the limit's dashed.
    expect(marks(svg, /mark-line role-mark layer_0_layer_0_marks/, 'path')).toBe(3);
    expect(svg.match(/stroke-dasharray="5,3"/g)?.length).toBeGreaterThanOrEqual(1);
  });

  it('puts the official charts in bench/charts and any other report\'s beside it, linked relatively', () => {
    expect(chartsDirFor('/repo/bench/RESULTS.md', true)).toBe('/repo/bench/charts');
    expect(chartsDirFor('/tmp/nestjs-redlock-bench-smoke.md', false)).toBe('/tmp/nestjs-redlock-bench-smoke.charts');
    const link = imageLink({ name: 'scenario-latency', title: 'Scenario 1: [one] caller' }, '/repo/bench/charts', '/repo/bench/RESULTS.md');
    expect(link).toBe('![Scenario 1: one caller](charts/scenario-latency.svg)');
    expect(IMAGE_LINE.test(link)).toBe(true);
  });
});
