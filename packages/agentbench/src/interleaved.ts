import type { Session, Subject } from './subjects/subject.js';
import { median, percentiles, timed } from './stats.js';

/** A figure over the measured rounds: the median, and the middle half of the rounds (25th to 75th percentile). */
export interface Spread {
  median: number;
  p25: number;
  p75: number;
}

/** Per-round ratios of one subject to another measured in the same round (ours ÷ theirs), summarised. */
export interface Ratios {
  /** 1 KB round trip p50 (lower is better). */
  rtt: Spread;
  /** 1 KB calls per second, one at a time and with 32 in flight (higher is better). */
  sequential: Spread;
  concurrent: Spread;
  /** Time to first token of a 1,000-token burst (lower is better). */
  ttft: Spread;
  /** Per-token cost of the burst (first token to last) minus theirs, µs. */
  perTokenOverUs: Spread;
}

export interface InterleavedResult {
  subject: string;
  baseline?: string;
  /** Median over rounds of each round's p50 and p99 (ms). */
  p50: number;
  p99: number;
  /** Each measured round's p50 (ms), in order: how much the machine drifted during the run. */
  roundP50s: number[];
  /** For an agentlink subject: the median over rounds of its p50 divided by its baseline's p50 in the same round. */
  ratio?: number;
  /** 1 KB calls per second: one at a time, and 32 in flight. */
  sequential: Spread;
  concurrent: Spread;
  /** A 1,000-token burst (16-byte tokens, produced without waiting): time to first token, and per-token cost. */
  ttftMs: Spread;
  perTokenUs: Spread;
  /** Against its raw transport (agentlink subjects), and against the reference subject (JSON-RPC over ws). */
  vsBaseline?: Ratios;
  vsReference?: Ratios;
  /** Bytes that crossed the socket for these figures (both directions). */
  bytes: number;
}

interface Round {
  p50: number;
  p99: number;
  sequential: number;
  concurrent: number;
  ttftMs: number;
  perTokenUs: number;
}

const KB = 1024;
const IN_FLIGHT = 32;
const TOKENS = 1000;
const TOKEN_BYTES = 16;
/** Bursts per subject and round; the round reports their medians. */
const BURSTS_PER_ROUND = 5;

/**
 * Every subject connected at once, measured in many short rounds that take turns (each round starting with the
 * next subject): a slow minute on a shared machine then lands on every subject alike, instead of on whichever
 * ran during it. A round measures 1 KB round trips (p50, p99, calls/s), calls with 32 in flight, and five
 * 1,000-token bursts (their medians). Each round's ratio compares subjects measured seconds apart; the median of those ratios is
 * the figure to trust when the per-subject tables and these disagree.
 */
export async function measureInterleaved(
  subjects: Subject[],
  options: { quick: boolean; reference?: string; onProgress?(message: string): void },
): Promise<InterleavedResult[]> {
  const rounds = options.quick ? 3 : 25;
  const callsPerRound = options.quick ? 200 : 600;
  const concurrentPerRound = options.quick ? 320 : 960;
  const payload = Buffer.alloc(KB, 5);
  const sessions: Session[] = [];
  try {
    for (const subject of subjects) sessions.push(await subject.connect());
    const measured: Round[][] = subjects.map(() => []);
    // Round 0 warms every path (both processes' JIT) and is not counted.
    for (let round = 0; round <= rounds; round++) {
      options.onProgress?.(`interleaved rounds, round ${round} of ${rounds}`);
      for (let turn = 0; turn < sessions.length; turn++) {
        const index = (round + turn) % sessions.length;
        const result = await measureRound(sessions[index]!, payload, callsPerRound, concurrentPerRound);
        if (round > 0) measured[index]!.push(result);
      }
    }
    const referenceIndex = subjects.findIndex((s) => s.name === options.reference);
    return subjects.map((subject, index) => {
      const own = measured[index]!;
      const baseIndex = subjects.findIndex((s) => s.name === subject.baseline);
      const roundP50s = own.map((r) => r.p50);
      return {
        subject: subject.name,
        baseline: subject.baseline,
        p50: median(roundP50s),
        p99: median(own.map((r) => r.p99)),
        roundP50s,
        ...(baseIndex >= 0 ? { ratio: median(own.map((r, i) => r.p50 / measured[baseIndex]![i]!.p50)) } : {}),
        sequential: spread(own.map((r) => r.sequential)),
        concurrent: spread(own.map((r) => r.concurrent)),
        ttftMs: spread(own.map((r) => r.ttftMs)),
        perTokenUs: spread(own.map((r) => r.perTokenUs)),
        ...(baseIndex >= 0 ? { vsBaseline: ratios(own, measured[baseIndex]!) } : {}),
        ...(referenceIndex >= 0 && referenceIndex !== index ? { vsReference: ratios(own, measured[referenceIndex]!) } : {}),
        bytes: (rounds + 1) * (2 * KB * (callsPerRound + concurrentPerRound) + BURSTS_PER_ROUND * TOKENS * TOKEN_BYTES),
      };
    });
  } finally {
    await Promise.all(sessions.map((session) => session.close()));
    await Promise.all(subjects.map((subject) => subject.dispose?.()));
  }
}

async function measureRound(session: Session, payload: Buffer, calls: number, concurrentCalls: number): Promise<Round> {
  const samples: number[] = [];
  const started = performance.now();
  for (let i = 0; i < calls; i++) samples.push(await timed(() => session.echo(payload)));
  const sequential = (calls * 1000) / (performance.now() - started);
  const p = percentiles(samples);

  let next = 0;
  const concurrentMs = await timed(() =>
    Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next++ < concurrentCalls) await session.echo(payload);
      }),
    ),
  );

  // A single burst's TTFT moves by 2× with the scheduler on a busy machine; the median of a few per round holds.
  const bursts: Array<{ ttftMs: number; perTokenUs: number }> = [];
  for (let i = 0; i < BURSTS_PER_ROUND; i++) bursts.push(await measureBurst(session));
  return {
    p50: p.p50,
    p99: p.p99,
    sequential,
    concurrent: (concurrentCalls * 1000) / concurrentMs,
    ttftMs: median(bursts.map((b) => b.ttftMs)),
    perTokenUs: median(bursts.map((b) => b.perTokenUs)),
  };
}

/** One 1,000-token burst: when its first token arrived, and the time per token after it. */
async function measureBurst(session: Session): Promise<{ ttftMs: number; perTokenUs: number }> {
  const burstStarted = performance.now();
  let first = 0;
  const bytes = await session.download(TOKENS * TOKEN_BYTES, TOKEN_BYTES, {
    onData: () => {
      if (first === 0) first = performance.now();
    },
  });
  const burstEnded = performance.now();
  if (bytes !== TOKENS * TOKEN_BYTES) throw new Error(`token burst moved ${bytes} of ${TOKENS * TOKEN_BYTES} bytes`);
  return { ttftMs: first - burstStarted, perTokenUs: ((burstEnded - first) * 1000) / (TOKENS - 1) };
}

function ratios(own: Round[], other: Round[]): Ratios {
  const per = (f: (mine: Round, theirs: Round) => number): Spread => spread(own.map((r, i) => f(r, other[i]!)));
  return {
    rtt: per((a, b) => a.p50 / b.p50),
    sequential: per((a, b) => a.sequential / b.sequential),
    concurrent: per((a, b) => a.concurrent / b.concurrent),
    ttft: per((a, b) => a.ttftMs / b.ttftMs),
    perTokenOverUs: per((a, b) => a.perTokenUs - b.perTokenUs),
  };
}

function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
  return { median: median(values), p25: at(0.25), p75: at(0.75) };
}
