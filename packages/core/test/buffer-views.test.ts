import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ChunkQueue, FrameDecoder, decodePayload, encodeFrame, type WireMessage } from '../src/transport.js';
import { FramedStream } from '../src/wire/framed-stream.js';
import { BufferViews } from '../src/util/bytes.js';
import { queueStream } from './queue-stream.js';

/**
 * A chunk's binary item bodies are made by `BufferViews` (the chunk's ArrayBuffer and offset read once, no
 * `subarray` per item): what a reader gets must be exactly what `subarray` gave — a Buffer of a Buffer chunk (a
 * plain Uint8Array of any other), over the same memory at the same offset — and nothing may keep a chunk once its
 * frames are read.
 */

/** A chunk at an offset inside a larger ArrayBuffer, as node's pooled and TLS buffers are. */
function offsetBuffer(bytes: Uint8Array, before: number): Buffer {
  const backing = Buffer.alloc(before + bytes.length + 7, 0xee);
  backing.set(bytes, before);
  return backing.subarray(before, before + bytes.length);
}

const tokenMessages: WireMessage[] = [
  { type: 'item', body: Buffer.alloc(16, 1) },
  { type: 'item', body: Buffer.alloc(0) },
  { type: 'item', body: Buffer.alloc(255, 3) },
  { type: 'item', body: Buffer.alloc(300, 4) },
  { type: 'item', body: 'token' },
  { type: 'response', body: Buffer.alloc(20, 5) },
  { type: 'end' },
];

/** Every message FramedStream's pull-style reader gives for `chunks`. */
async function receiveAll(chunks: Uint8Array[]): Promise<WireMessage[]> {
  const queue = new ChunkQueue();
  for (const chunk of chunks) queue.push(chunk);
  queue.end();
  const framed = new FramedStream(queueStream(queue, { push: false }), 1 << 20);
  const received: WireMessage[] = [];
  for (let message = await framed.receive(); message; message = await framed.receive()) received.push(message);
  return received;
}

describe('BufferViews', () => {
  it('gives the view subarray gives: a Buffer over the same memory at the same offset', () => {
    const chunk = offsetBuffer(Buffer.from('0123456789abcdef'), 13);
    const views = BufferViews.of(chunk)!;
    for (const [start, end] of [
      [0, 16],
      [3, 9],
      [16, 16],
      [0, 0],
    ] as const) {
      const view = views.view(start, end);
      const expected = chunk.subarray(start, end);
      expect(Object.getPrototypeOf(view)).toBe(Buffer.prototype);
      expect(Buffer.isBuffer(view)).toBe(true);
      expect(view.buffer).toBe(chunk.buffer);
      expect(view.byteOffset).toBe(expected.byteOffset);
      expect(view.length).toBe(expected.length);
      expect(view.toString('latin1')).toBe(expected.toString('latin1'));
    }
  });

  it('makes no views of a Uint8Array that is not a Buffer (subarray keeps its class)', () => {
    expect(BufferViews.of(new Uint8Array(8))).toBeUndefined();
  });

  it('FramedStream gives the bodies push and decodePayload give, of the same class and memory, however the chunks are cut', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...tokenMessages), { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 5 }),
        fc.nat({ max: 64 }),
        fc.boolean(),
        async (sent, cuts, before, plain) => {
          const stream = Buffer.concat(sent.map((message) => encodeFrame(message)));
          const points = [...new Set(cuts.map((cut) => cut % (stream.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...points].map((from, i) => {
            const piece = stream.subarray(from, [...points, stream.length][i]);
            return plain ? new Uint8Array(piece) : offsetBuffer(piece, before);
          });
          const pushed = new FrameDecoder();
          const expected = chunks.flatMap((chunk) => pushed.push(chunk)).map((payload) => decodePayload(payload));
          const received = await receiveAll(chunks);
          expect(received).toEqual(expected);
          for (let i = 0; i < expected.length; i++) {
            const body = (expected[i] as { body?: unknown }).body;
            const got = (received[i] as { body?: unknown }).body;
            if (!(body instanceof Uint8Array)) continue;
            expect(Object.getPrototypeOf(got)).toBe(Object.getPrototypeOf(body));
            // A frame inside one chunk: push's body is a view of that chunk, and so must ours be, at the same place
            // (a frame joined from chunks is each decoder's own copy).
            if (!chunks.some((chunk) => chunk.buffer === body.buffer)) continue;
            expect((got as Uint8Array).buffer).toBe(body.buffer);
            expect((got as Uint8Array).byteOffset).toBe(body.byteOffset);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a decoder keeps no views of a chunk once it let go of the frame, or read the chunk to its end', () => {
    const decoder = new FrameDecoder();
    const frames = [Buffer.alloc(16, 1), Buffer.alloc(16, 2)].map((body) => encodeFrame({ type: 'item', body }));
    decoder.feed(offsetBuffer(Buffer.concat(frames), 5));
    expect(decoder.next()).toBe(true);
    expect(decoder.frameViews).toBeDefined();
    decoder.release();
    expect(decoder.frameViews).toBeUndefined();
    expect(decoder.next()).toBe(true);
    expect(decoder.frameViews).toBeDefined();
    expect(decoder.next()).toBe(false);
    expect(decoder.frameViews).toBeUndefined();
    expect(decoder.frameBytes.length).toBe(0);
  });

  it('a chunk of one whole frame makes no views (a reply: they pay off over many frames)', () => {
    const decoder = new FrameDecoder();
    decoder.feed(encodeFrame({ type: 'item', body: Buffer.alloc(16, 1) }));
    expect(decoder.next()).toBe(true);
    expect(decoder.frameViews).toBeUndefined();
  });
});
