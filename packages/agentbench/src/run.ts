import type { Session, Subject } from './subjects/subject.js';
import { median, percentiles, timed } from './stats.js';

export interface RunOptions {
  quick: boolean;
  onProgress?(message: string): void;
  /** CPU microseconds the serving process has used so far, when it can tell (an agentbench server can). */
  serverCpuMicros?(): Promise<number>;
}

export interface LatencyFigure {
  p50: number;
  p95: number;
  p99: number;
  n: number;
  /** Bytes that crossed the socket for this figure (both directions). */
  bytes: number;
}

export interface SubjectResult {
  subject: string;
  baseline?: string;
  connect: { ms: number; n: number; bytes: number };
  rtt: Record<string, LatencyFigure>;
  sequential: { msgsPerSecond: number; bytes: number };
  concurrent: { msgsPerSecond: number; inFlight: number; bytes: number };
  /**
   * CPU milliseconds per MB moved, client and server process (all their threads), when the server reports its
   * CPU: on a machine with few cores, throughput is CPU per byte, whatever the protocol.
   */
  bulk: { mbPerSecond: number; bytes: number; cpuMsPerMB?: { client: number; server: number } };
  concurrentEcho: { seconds: number; bytes: number };
  tokens: {
    /** 1,000 tokens as fast as the producer can, median of 5 streams: time to first token, per-token overhead, tokens/s. */
    burst: { ttftMs: number; perTokenUs: number; tokensPerSecond: number; bytes: number };
    /** agenkit's scenario: 50 tokens, one every 50 ms. */
    paced: { ttftMs: number; totalMs: number; overheadMs: number; bytes: number };
  };
}

const KB = 1024;
const MB = 1024 * 1024;
const TOKEN_BYTES = 16;
const BURSTS = 5;

/** Measures one subject over one connection: every figure is bytes that crossed a socket, and says how many. */
export async function measureSubject(subject: Subject, options: RunOptions): Promise<SubjectResult> {
  const q = options.quick;
  const progress = (what: string): void => options.onProgress?.(`${subject.name}: ${what}`);

  progress('connect');
  const connects: number[] = [];
  for (let i = 0; i < (q ? 5 : 10); i++) {
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
      ? [['1KB', KB, 300], ['10KB', 10 * KB, 100], ['100KB', 100 * KB, 30], ['1MB', MB, 5]]
      : [['1KB', KB, 2000], ['10KB', 10 * KB, 500], ['100KB', 100 * KB, 200], ['1MB', MB, 30]];
    let sequential = { msgsPerSecond: 0, bytes: 0 };
    // Steady state, as a long-lived agent sees it: both processes' JIT warm on this path (a cold first thousand
    // calls measured ~2× slower for agentlink, ~1.3× for the raw transports). Same budget for every subject.
    const warmUntil = performance.now() + (q ? 200 : 1000);
    const warmPayload = Buffer.alloc(KB, 1);
    while (performance.now() < warmUntil) await session.echo(warmPayload);
    for (const [label, size, rounds] of sizes) {
      progress(`round trips of ${label}`);
      const payload = Buffer.alloc(size, 1);
      for (let i = 0; i < Math.ceil(rounds / 10); i++) await session.echo(payload); // warm-up
      const samples: number[] = [];
      const started = performance.now();
      for (let i = 0; i < rounds; i++) samples.push(await timed(() => session.echo(payload)));
      const elapsed = performance.now() - started;
      const p = percentiles(samples);
      rtt[label] = { p50: p.p50, p95: p.p95, p99: p.p99, n: p.n, bytes: 2 * size * rounds };
      if (label === '1KB') sequential = { msgsPerSecond: (rounds * 1000) / elapsed, bytes: 2 * size * rounds };
    }

    progress('concurrent 1 KB calls');
    const inFlight = 32;
    const total = q ? 2000 : 10000;
    const small = Buffer.alloc(KB, 2);
    let next = 0;
    const concurrentMs = await timed(() =>
      Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next++ < total) await session.echo(small);
        }),
      ),
    );
    const concurrent = { msgsPerSecond: (total * 1000) / concurrentMs, inFlight, bytes: 2 * KB * total };

    progress('bulk transfer');
    const bulkTotal = (q ? 16 : 64) * MB;
    const bulk: number[] = [];
    let bulkBytes = 0;
    // Warm for a while, as for round trips: both sides' bulk paths ran their first few hundred MB measurably
    // slower (JIT tiers, the young generation growing to its working size), agentlink's more than raw's.
    const warmBulkUntil = performance.now() + (q ? 200 : 1000);
    while (performance.now() < warmBulkUntil) await session.download(bulkTotal / 4, 64 * KB);
    const serverCpuBefore = await options.serverCpuMicros?.().catch(() => undefined);
    const clientCpuBefore = process.cpuUsage();
    for (let i = 0; i < 5; i++) {
      let received = 0;
      const ms = await timed(async () => (received = await session.download(bulkTotal, 64 * KB)));
      if (received !== bulkTotal) throw new Error(`${subject.name}: downloaded ${received} of ${bulkTotal} bytes`);
      bulkBytes += received;
      bulk.push(received / MB / (ms / 1000));
    }
    const clientCpu = process.cpuUsage(clientCpuBefore);
    const serverCpuAfter = serverCpuBefore === undefined ? undefined : await options.serverCpuMicros?.().catch(() => undefined);
    const cpuMsPerMB =
      serverCpuBefore === undefined || serverCpuAfter === undefined
        ? undefined
        : { client: (clientCpu.user + clientCpu.system) / 1000 / (bulkBytes / MB), server: (serverCpuAfter - serverCpuBefore) / 1000 / (bulkBytes / MB) };

    progress('100 concurrent 100 KB echoes');
    const payload = Buffer.alloc(100 * KB, 3);
    const concurrentEcho: number[] = [];
    for (let i = 0; i < 3; i++) {
      concurrentEcho.push(await timed(() => Promise.all(Array.from({ length: 100 }, () => session.echo(payload)))));
    }

    progress('token streams');
    // The streaming path warm, as for round trips: after the bulk scenarios its first uses measured 10+ ms slow.
    for (let i = 0; i < (q ? 3 : 20); i++) await tokenStream(session, 100, 0);
    await tokenStream(session, 5, 5);
    // One burst is one sample of a few milliseconds: a scavenge or a scheduling hiccup moved it by 1 ms and more.
    const bursts: Array<Awaited<ReturnType<typeof tokenStream>>> = [];
    for (let i = 0; i < BURSTS; i++) bursts.push(await tokenStream(session, 1000, 0));
    const burstTtftMs = median(bursts.map((b) => b.ttftMs));
    const burstStreamMs = median(bursts.map((b) => b.totalMs - b.ttftMs)); // first token to last
    const paced = await tokenStream(session, 50, 50);

    return {
      subject: subject.name,
      baseline: subject.baseline,
      connect: { ms: median(connects), n: connects.length, bytes: 2 * connects.length },
      rtt,
      sequential,
      concurrent,
      bulk: { mbPerSecond: median(bulk), bytes: bulkBytes, ...(cpuMsPerMB ? { cpuMsPerMB } : {}) },
      concurrentEcho: { seconds: median(concurrentEcho) / 1000, bytes: 3 * 100 * 2 * payload.length },
      tokens: {
        burst: {
          ttftMs: burstTtftMs,
          perTokenUs: (burstStreamMs * 1000) / (1000 - 1),
          tokensPerSecond: ((1000 - 1) * 1000) / burstStreamMs,
          bytes: bursts.reduce((sum, b) => sum + b.bytes, 0),
        },
        paced: { ttftMs: paced.ttftMs, totalMs: paced.totalMs, overheadMs: paced.totalMs - 50 * 50, bytes: paced.bytes },
      },
    };
  } finally {
    await session.close();
    await subject.dispose?.();
  }
}

/** Streams `count` tokens of 16 bytes, one every `delayMs`; times the first and the last. */
async function tokenStream(session: Session, count: number, delayMs: number) {
  const started = performance.now();
  let first = 0;
  const bytes = await session.download(count * TOKEN_BYTES, TOKEN_BYTES, {
    delayMs,
    onData: () => {
      if (first === 0) first = performance.now();
    },
  });
  if (bytes !== count * TOKEN_BYTES) throw new Error(`token stream moved ${bytes} of ${count * TOKEN_BYTES} bytes`);
  return { ttftMs: first - started, totalMs: performance.now() - started, tokens: count, bytes };
}
