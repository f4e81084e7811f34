import type { Session, Subject } from './subjects/subject.js';
import { median, percentiles, timed } from './stats.js';

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
  /** Bytes that crossed the socket for this figure (both directions). */
  bytes: number;
}

const KB = 1024;

/**
 * 1 KB round trips with every subject connected at once, in many short rounds that take turns (each round
 * starting with the next subject): a slow minute on a shared machine then lands on every subject alike, instead
 * of on whichever ran during it. Each round's ratio compares subjects measured seconds apart; their median is the
 * figure to trust when the per-subject table and this one disagree.
 */
export async function measureInterleaved(subjects: Subject[], options: { quick: boolean; onProgress?(message: string): void }): Promise<InterleavedResult[]> {
  const rounds = options.quick ? 3 : 25;
  const callsPerRound = options.quick ? 200 : 600;
  const payload = Buffer.alloc(KB, 5);
  const sessions: Session[] = [];
  try {
    for (const subject of subjects) sessions.push(await subject.connect());
    const roundP50s: number[][] = subjects.map(() => []);
    const roundP99s: number[][] = subjects.map(() => []);
    // Round 0 warms every path (both processes' JIT) and is not counted.
    for (let round = 0; round <= rounds; round++) {
      options.onProgress?.(`interleaved round trips, round ${round} of ${rounds}`);
      for (let turn = 0; turn < sessions.length; turn++) {
        const index = (round + turn) % sessions.length;
        const session = sessions[index]!;
        const samples: number[] = [];
        for (let i = 0; i < callsPerRound; i++) samples.push(await timed(() => session.echo(payload)));
        if (round === 0) continue;
        const p = percentiles(samples);
        roundP50s[index]!.push(p.p50);
        roundP99s[index]!.push(p.p99);
      }
    }
    return subjects.map((subject, index) => {
      const baseIndex = subjects.findIndex((s) => s.name === subject.baseline);
      const ratios = baseIndex < 0 ? [] : roundP50s[index]!.map((p50, round) => p50 / roundP50s[baseIndex]![round]!);
      return {
        subject: subject.name,
        baseline: subject.baseline,
        p50: median(roundP50s[index]!),
        p99: median(roundP99s[index]!),
        roundP50s: roundP50s[index]!,
        ...(ratios.length > 0 ? { ratio: median(ratios) } : {}),
        bytes: 2 * KB * callsPerRound * (rounds + 1),
      };
    });
  } finally {
    await Promise.all(sessions.map((session) => session.close()));
    await Promise.all(subjects.map((subject) => subject.dispose?.()));
  }
}
