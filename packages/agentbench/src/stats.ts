/** Percentiles of a sample (nearest-rank on the sorted values). */
export function percentiles(samples: number[]): { p50: number; p95: number; p99: number; mean: number; n: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
  const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), mean, n: sorted.length };
}

export function median(values: number[]): number {
  return percentiles(values).p50;
}

export async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}
