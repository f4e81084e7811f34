/**
 * tinybench micro suite of the hot path: frame encode/decode and the codec choice (msgpack binary vs JSON,
 * which must base64 bytes). Usage: pnpm bench
 */
import { Bench } from 'tinybench';
import { FrameDecoder, decodePayload, encodeFrame, type WireMessage } from '@agentlink/core';

const token: WireMessage = { type: 'item', body: { text: 'hello ', index: 42 } };
const request1k: WireMessage = {
  type: 'request',
  method: 'echo',
  timeoutMs: 30_000,
  priority: 'normal',
  metadata: {},
  body: Buffer.alloc(1024, 7),
  mode: 'unary',
};
const binary64k = Buffer.alloc(64 * 1024, 9);
const tokenFrame = encodeFrame(token);
const requestFrame = encodeFrame(request1k);
const binaryFrame = encodeFrame({ type: 'item', body: binary64k });
const jsonBinary = JSON.stringify({ type: 'item', body: binary64k.toString('base64') });

const bench = new Bench({ time: 500, warmupTime: 100 });
bench
  .add('encode token item', () => encodeFrame(token))
  .add('decode token item (incl. zod validation)', () => decodePayload(new FrameDecoder().push(tokenFrame)[0]!))
  .add('encode 1 KB request', () => encodeFrame(request1k))
  .add('decode 1 KB request', () => decodePayload(new FrameDecoder().push(requestFrame)[0]!))
  .add('encode 64 KB binary item (msgpack bin)', () => encodeFrame({ type: 'item', body: binary64k }))
  .add('encode 64 KB binary item (JSON + base64)', () => JSON.stringify({ type: 'item', body: binary64k.toString('base64') }))
  .add('decode 64 KB binary item (msgpack bin)', () => decodePayload(new FrameDecoder().push(binaryFrame)[0]!))
  .add('decode 64 KB binary item (JSON + base64)', () => Buffer.from((JSON.parse(jsonBinary) as { body: string }).body, 'base64'));

await bench.run();
console.log(`Node ${process.version}; ${binaryFrame.length} B msgpack frame vs ${jsonBinary.length} B JSON for a 64 KB body`);
console.table(
  bench.tasks.map((task) => {
    const r = task.result as { throughput?: { mean: number }; latency?: { mean: number; p99?: number } } | undefined;
    return {
      task: task.name,
      'ops/s': Math.round(r?.throughput?.mean ?? 0),
      'mean µs': ((r?.latency?.mean ?? 0) * 1000).toFixed(2),
      'p99 µs': ((r?.latency?.p99 ?? 0) * 1000).toFixed(2),
    };
  }),
);
