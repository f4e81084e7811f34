/**
 * The tinybench micro suite of agentlink's hot path: frame encode/decode (with zod validation), the codec choice
 * (msgpack binary vs JSON, which must base64 bytes), and the mux's per-frame work.
 */
import { Bench } from 'tinybench';
import { AgentError, Identity } from '@agentlink/core';
import { FrameDecoder, MuxedChannel, decodePayload, encodeFrame, type ChannelStream, type WireMessage } from '@agentlink/core/transport';

const token: WireMessage = { type: 'item', body: { text: 'hello ', index: 42 } };
const request1k: WireMessage = { type: 'request', method: 'echo', timeoutMs: 30_000, priority: 'normal', metadata: {}, body: Buffer.alloc(1024, 7), mode: 'unary' };
const binary64k = Buffer.alloc(64 * 1024, 9);

export function buildSuite(options: { time?: number } = {}): Bench {
  const tokenFrame = encodeFrame(token);
  const requestFrame = encodeFrame(request1k);
  const binaryFrame = encodeFrame({ type: 'item', body: binary64k });
  const jsonBinary = JSON.stringify({ type: 'item', body: binary64k.toString('base64') });

  // A multiplexer whose pipe discards frames; credit is topped up so writes never wait.
  const sink = new MuxedChannel({
    kind: 'bench',
    peer: Identity.generate().id,
    remoteAddress: 'memory',
    role: 'dialer',
    onStream: () => undefined,
    pipe: { send: () => undefined, bufferedAmount: 0, close: () => undefined },
    window: 2 ** 30,
  });
  let outbound: ChannelStream | undefined;
  let inbound: ChannelStream | undefined;
  const receiver = new MuxedChannel({
    kind: 'bench',
    peer: Identity.generate().id,
    remoteAddress: 'memory',
    role: 'listener',
    onStream: (stream) => (inbound = stream),
    pipe: { send: () => undefined, bufferedAmount: 0, close: () => undefined },
    window: 2 ** 30,
  });
  const kb = Buffer.alloc(1024, 1);
  const openFrame = Buffer.concat([Buffer.from([0, 0, 0, 0, 1]), kb]);
  const dataFrame = Buffer.concat([Buffer.from([1, 0, 0, 0, 1]), kb]);

  const bench = new Bench({ time: options.time ?? 500, warmupTime: 100 });
  bench
    .add('encode token item', () => encodeFrame(token))
    .add('decode token item (incl. zod validation)', () => decodePayload(new FrameDecoder().push(tokenFrame)[0]!))
    .add('encode 1 KB request', () => encodeFrame(request1k))
    .add('decode 1 KB request', () => decodePayload(new FrameDecoder().push(requestFrame)[0]!))
    .add('encode 64 KB binary item (msgpack bin)', () => encodeFrame({ type: 'item', body: binary64k }))
    .add('encode 64 KB binary item (JSON + base64)', () => JSON.stringify({ type: 'item', body: binary64k.toString('base64') }))
    .add('decode 64 KB binary item (msgpack bin)', () => decodePayload(new FrameDecoder().push(binaryFrame)[0]!))
    .add('decode 64 KB binary item (JSON + base64)', () => Buffer.from((JSON.parse(jsonBinary) as { body: string }).body, 'base64'))
    .add(
      'mux: write 1 KB on a stream',
      async () => {
        await outbound!.write(kb);
        (outbound as unknown as { onWindow(n: number): void }).onWindow(kb.length); // the peer's credit, as if acked
      },
      { beforeAll: async () => void (outbound = await sink.openStream()) },
    )
    .add(
      'mux: receive 1 KB DATA frame and read it',
      async () => {
        receiver.receive(dataFrame);
        await inbound!.read();
      },
      {
        beforeAll: () => {
          receiver.receive(openFrame);
          return inbound!.read().then(() => undefined);
        },
        afterAll: () => inbound?.reset(new AgentError('CANCELLED', 'bench done')),
      },
    );
  return bench;
}

export interface TaskFigure {
  task: string;
  opsPerSecond: number;
  meanUs: number;
  p99Us: number;
}

export function figures(bench: Bench): TaskFigure[] {
  return bench.tasks.map((task) => {
    const r = task.result as { throughput?: { mean: number }; latency?: { mean: number; p99?: number } } | undefined;
    return {
      task: task.name,
      opsPerSecond: Math.round(r?.throughput?.mean ?? 0),
      meanUs: (r?.latency?.mean ?? 0) * 1000,
      p99Us: (r?.latency?.p99 ?? 0) * 1000,
    };
  });
}
