import type { Session, Subject } from './subjects/subject.js';
import { median, percentiles, timed } from './stats.js';

export interface RunOptions {
  quick: boolean;
  onProgress?(message: string): void;
}

export interface SubjectResult {
  subject: string;
  baseline?: string;
  connectMs: number;
  rtt: Record<string, { p50: number; p95: number; p99: number; n: number; bytes: number }>;
  bulkMBps: number;
  bulkBytes: number;
  concurrentEchoSeconds: number;
  concurrentEchoBytes: number;
}

const KB = 1024;
const MB = 1024 * 1024;

/** Measures one subject: every figure is bytes that crossed a socket, and says how many. */
export async function measureSubject(subject: Subject, options: RunOptions): Promise<SubjectResult> {
  const q = options.quick;
  const progress = (what: string): void => options.onProgress?.(`${subject.name}: ${what}`);

  progress('connect');
  const connects: number[] = [];
  for (let i = 0; i < (q ? 5 : 20); i++) {
    let session: Session | undefined;
    connects.push(
      await timed(async () => {
        session = await subject.connect();
        await session.echo(Buffer.alloc(1));
      }),
    );
    await session?.close();
  }

  const session = await subject.connect();
  try {
    const rtt: SubjectResult['rtt'] = {};
    const sizes: Array<[string, number, number]> = q
      ? [['1KB', KB, 300], ['100KB', 100 * KB, 30]]
      : [['1KB', KB, 3000], ['10KB', 10 * KB, 1000], ['100KB', 100 * KB, 300], ['1MB', MB, 50]];
    for (const [label, size, rounds] of sizes) {
      progress(`round trips of ${label}`);
      const payload = Buffer.alloc(size, 1);
      for (let i = 0; i < Math.ceil(rounds / 10); i++) await session.echo(payload); // warm-up
      const samples: number[] = [];
      for (let i = 0; i < rounds; i++) samples.push(await timed(() => session.echo(payload)));
      const p = percentiles(samples);
      rtt[label] = { p50: p.p50, p95: p.p95, p99: p.p99, n: p.n, bytes: 2 * size * rounds };
    }

    progress('bulk transfer');
    const bulkTotal = (q ? 16 : 128) * MB;
    const bulk: number[] = [];
    let bulkBytes = 0;
    await session.download(bulkTotal / 4, 64 * KB); // warm-up
    for (let i = 0; i < 3; i++) {
      let received = 0;
      const ms = await timed(async () => (received = await session.download(bulkTotal, 64 * KB)));
      if (received !== bulkTotal) throw new Error(`${subject.name}: downloaded ${received} of ${bulkTotal} bytes`);
      bulkBytes += received;
      bulk.push(received / MB / (ms / 1000));
    }

    progress('100 concurrent 100 KB echoes');
    const payload = Buffer.alloc(100 * KB, 3);
    const concurrent: number[] = [];
    for (let i = 0; i < 3; i++) {
      concurrent.push(await timed(() => Promise.all(Array.from({ length: 100 }, () => session.echo(payload)))));
    }

    return {
      subject: subject.name,
      baseline: subject.baseline,
      connectMs: median(connects),
      rtt,
      bulkMBps: median(bulk),
      bulkBytes,
      concurrentEchoSeconds: median(concurrent) / 1000,
      concurrentEchoBytes: 3 * 100 * 2 * payload.length,
    };
  } finally {
    await session.close();
    await subject.dispose?.();
  }
}
