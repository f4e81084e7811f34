/** A network path to emulate: one-way delay, jitter (uniform ±), random loss. */
export interface Impairment {
  delayMs: number;
  jitterMs: number;
  lossPercent: number;
}

/** Parses "loss=1,delay=40,jitter=5" (percent, ms, ms). */
export function parseImpairment(text: string): Impairment {
  const values = Object.fromEntries(text.split(',').map((part) => part.split('=').map((s) => s.trim()) as [string, string]));
  const number = (key: string, fallback: number): number => {
    const value = values[key] === undefined ? fallback : Number(values[key]);
    if (!Number.isFinite(value) || value < 0) throw new Error(`--impair ${key} must be a non-negative number`);
    return value;
  };
  return { delayMs: number('delay', 40), jitterMs: number('jitter', 0), lossPercent: number('loss', 1) };
}

export function oneWayDelay(impairment: Impairment): number {
  return Math.max(0, impairment.delayMs + (Math.random() * 2 - 1) * impairment.jitterMs);
}

export function isLost(impairment: Impairment): boolean {
  return Math.random() * 100 < impairment.lossPercent;
}
