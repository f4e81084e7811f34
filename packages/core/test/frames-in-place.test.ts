import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ChunkQueue, FrameDecoder, decodePayload, encodeFrame, type ChannelStream, type WireMessage } from '../src/transport.js';
import { decodePayloadAt } from '../src/wire/codec.js';
import { FramedStream } from '../src/wire/framed-stream.js';
import { queueStream } from './queue-stream.js';
import type { ByteBudget } from '../src/agent/byte-budget.js';

/**
 * A chunk's frames are read where they lie (FrameDecoder.feed/next, FramedStream's reads): no view of each payload
 * and no list of a chunk's frames. These hold that path to what `push` gives, and its budget to what it held.
 */

const messages: WireMessage[] = [
  { type: 'item', body: Buffer.alloc(16, 1) },
  { type: 'item', body: 'token' },
  { type: 'item', body: { nested: [1, 'two'] } },
  { type: 'response', body: Buffer.alloc(300, 2) },
  { type: 'end' },
  { type: 'error', code: 'HANDLER_ERROR', message: 'boom' },
];

/** Every frame `next` finds in `chunks`, decoded in place, and whether each whole one was read inside its chunk. */
function readInPlace(chunks: Uint8Array[]): { decoded: WireMessage[]; inChunk: boolean[] } {
  const decoder = new FrameDecoder();
  const decoded: WireMessage[] = [];
  const inChunk: boolean[] = [];
  for (const chunk of chunks) {
    decoder.feed(chunk);
    while (decoder.next()) {
      decoded.push(decodePayloadAt(decoder.frameBytes, decoder.frameStart, decoder.frameEnd));
      inChunk.push(decoder.frameBytes === chunk);
    }
    expect(decoder.unread).toBe(false);
  }
  return { decoded, inChunk };
}


/** A budget that records what a holder was charged, in order. */
function recordingBudget(): ByteBudget & { charges: number[] } {
  const charges: number[] = [];
  return { charges, set: (_holder: unknown, bytes: number) => void charges.push(bytes) } as unknown as ByteBudget & { charges: number[] };
}

describe('frames read in place', () => {
  it('next gives what push gives, however the bytes are cut; a frame inside one chunk is read from that chunk', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...messages), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (sent, cuts) => {
          const stream = Buffer.concat(sent.map((message) => encodeFrame(message)));
          const points = [...new Set(cuts.map((cut) => cut % (stream.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...points].map((from, i) => stream.subarray(from, [...points, stream.length][i]));
          const pushed = new FrameDecoder();
          const viaPush = chunks.flatMap((chunk) => pushed.push(chunk)).map((payload) => decodePayload(payload));
          const { decoded, inChunk } = readInPlace(chunks);
          expect(decoded).toEqual(sent);
          expect(viaPush).toEqual(sent);
          if (points.length === 0) expect(inChunk.every(Boolean)).toBe(true); // one chunk: no frame was copied
        },
      ),
      { numRuns: 300 },
    );
  });

  it('bodies of a chunk of tokens are views of that chunk, not copies', () => {
    const chunk = Buffer.concat(Array.from({ length: 680 }, (_, i) => encodeFrame({ type: 'item', body: Buffer.alloc(16, i % 256) })));
    const { decoded, inChunk } = readInPlace([chunk]);
    expect(decoded).toHaveLength(680);
    expect(inChunk.every(Boolean)).toBe(true);
    const body = (decoded[679] as { body: Buffer }).body;
    expect(body.buffer).toBe(chunk.buffer);
    expect(body).toEqual(Buffer.alloc(16, 679 % 256));
  });

  it('a frame over the limit is refused when reached, after the whole frames before it, and nothing after it is read', () => {
    const decoder = new FrameDecoder(64);
    decoder.feed(Buffer.concat([encodeFrame({ type: 'item', body: 'a' }), encodeFrame({ type: 'item', body: 'x'.repeat(100) }), encodeFrame({ type: 'end' })]));
    expect(decoder.next()).toBe(true);
    expect(decodePayloadAt(decoder.frameBytes, decoder.frameStart, decoder.frameEnd)).toEqual({ type: 'item', body: 'a' });
    expect(() => decoder.next()).toThrowError(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
    expect(decoder.unread).toBe(false);
    expect(() => new FrameDecoder(64).push(Buffer.concat([encodeFrame({ type: 'end' }), encodeFrame({ type: 'item', body: 'x'.repeat(100) })]))).toThrowError(
      expect.objectContaining({ code: 'FRAME_TOO_LARGE' }),
    );
  });

  it('a chunk may be fed only once the one before it was read to its end', () => {
    const decoder = new FrameDecoder();
    decoder.feed(Buffer.concat([encodeFrame({ type: 'end' }), encodeFrame({ type: 'end' })]));
    expect(decoder.next()).toBe(true);
    expect(() => decoder.feed(encodeFrame({ type: 'end' }))).toThrow(/not read to its end/);
    expect(decoder.next()).toBe(true);
    expect(decoder.next()).toBe(false);
    expect(decoder.idle).toBe(true);
  });

  it('FramedStream charges the budget with a frame left unfinished once it reaches it, and releases it when the frame completes', async () => {
    const queue = new ChunkQueue();
    const budget = recordingBudget();
    const framed = new FramedStream(queueStream(queue, { push: false }), 1024 * 1024, budget);
    const large = encodeFrame({ type: 'response', body: Buffer.alloc(100_000, 3) });
    queue.push(Buffer.concat([encodeFrame({ type: 'item', body: 'one' }), encodeFrame({ type: 'item', body: 'two' }), large.subarray(0, 50_000)]));
    expect(await framed.receive()).toEqual({ type: 'item', body: 'one' });
    expect(framed.drained).toBe(false); // the rest of the chunk is not read yet
    expect(framed.takeReady()).toEqual({ type: 'item', body: 'two' });
    expect(budget.charges).toEqual([]); // nothing unfinished reached yet
    expect(framed.takeReady()).toBeUndefined(); // the chunk ends inside the response: its bytes are held now
    expect(budget.charges).toHaveLength(1);
    expect(budget.charges[0]).toBeGreaterThanOrEqual(50_000 - 4);
    expect(framed.drained).toBe(false);
    queue.push(large.subarray(50_000));
    expect(await framed.receive()).toEqual({ type: 'response', body: Buffer.alloc(100_000, 3) });
    expect(budget.charges.at(-1)).toBe(0);
    expect(framed.drained).toBe(true);
  });

  it('FramedStream reads the frames of a chunk before a frame over the limit, then fails the read and releases the budget', async () => {
    const queue = new ChunkQueue();
    const budget = recordingBudget();
    const framed = new FramedStream(queueStream(queue, { push: false }), 64, budget);
    queue.push(Buffer.concat([encodeFrame({ type: 'item', body: 'kept' }), encodeFrame({ type: 'item', body: 'x'.repeat(100) })]));
    expect(await framed.receive()).toEqual({ type: 'item', body: 'kept' });
    await expect(framed.receive()).rejects.toMatchObject({ code: 'FRAME_TOO_LARGE' });
    expect(budget.charges).toEqual([0]);
  });
});

const gc = (globalThis as { gc?: () => void }).gc!;

/** Collects garbage after the current job, so WeakRefs made in it may clear (vitest runs with --expose-gc). */
async function collect(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  gc();
}

/**
 * The reader lets go of what it returned: once the consumer drops a message, nothing of it (the frame joined from
 * chunks, or the chunk its frames lay in) stays pinned by a reader that waits for the next chunk — a peer could
 * otherwise make every open stream hold its last frame (up to maxFrameSize) with no budget charged for it.
 */
describe('frames read in place are not held after they are returned', () => {
  /** The payload buffer of a 1 MiB response that arrived in two chunks, received and then dropped by the consumer. */
  async function receiveJoined(framed: FramedStream, queue: ChunkQueue): Promise<WeakRef<ArrayBufferLike>> {
    const frame = encodeFrame({ type: 'response', body: Buffer.alloc(1024 * 1024, 7) });
    queue.push(Buffer.from(frame.subarray(0, 1000)));
    queue.push(Buffer.from(frame.subarray(1000)));
    const message = (await framed.receive()) as { type: string; body: Buffer };
    expect(message.body.equals(Buffer.alloc(1024 * 1024, 7))).toBe(true);
    return new WeakRef(message.body.buffer);
  }

  /** A chunk of two frames, the last ending at the chunk's end, both received and dropped. */
  async function receiveChunk(framed: FramedStream, queue: ChunkQueue): Promise<WeakRef<ArrayBufferLike>> {
    const chunk = Buffer.concat([encodeFrame({ type: 'item', body: 'first' }), encodeFrame({ type: 'item', body: Buffer.alloc(256 * 1024, 5) })]);
    queue.push(chunk);
    expect(await framed.receive()).toEqual({ type: 'item', body: 'first' });
    const second = framed.takeReady() as { body: Buffer };
    expect(second.body.length).toBe(256 * 1024);
    return new WeakRef(chunk.buffer);
  }

  it('pull reads: a frame joined from chunks, once dropped, is not pinned while the reader waits', async () => {
    const queue = new ChunkQueue();
    const framed = new FramedStream(queueStream(queue, { push: false }), 16 * 1024 * 1024);
    const joined = await receiveJoined(framed, queue);
    const waiting = framed.receive(); // the consumer reads on: nothing more has come
    await collect();
    expect(joined.deref()?.byteLength).toBeUndefined(); // collected (a size: it is still held)
    queue.end();
    expect(await waiting).toBeUndefined();
  });

  it('pull reads: a chunk whose frames were all returned and dropped is not pinned while the reader waits', async () => {
    const queue = new ChunkQueue();
    const framed = new FramedStream(queueStream(queue, { push: false }), 16 * 1024 * 1024);
    const chunk = await receiveChunk(framed, queue);
    const waiting = framed.receive();
    await collect();
    expect(chunk.deref()?.byteLength).toBeUndefined();
    queue.end();
    expect(await waiting).toBeUndefined();
  });

  it('push reads: the last frame handed to the receiver is not pinned between chunks', async () => {
    const queue = new ChunkQueue();
    const framed = new FramedStream(queueStream(queue), 16 * 1024 * 1024);
    const received: WireMessage[] = [];
    const ended: string[] = [];
    expect(framed.listen({ onMessage: (message) => (message ? void received.push(message) : void ended.push('end')), onReadError: () => void ended.push('error') })).toBe(true);
    const joined = ((): WeakRef<ArrayBufferLike> => {
      const frame = encodeFrame({ type: 'response', body: Buffer.alloc(1024 * 1024, 9) });
      queue.push(Buffer.from(frame.subarray(0, 1000)));
      queue.push(Buffer.from(frame.subarray(1000)));
      const body = (received.pop() as { body: Buffer }).body;
      expect(body.equals(Buffer.alloc(1024 * 1024, 9))).toBe(true);
      return new WeakRef(body.buffer);
    })();
    await collect();
    expect(joined.deref()?.byteLength).toBeUndefined(); // collected (a size: it is still held)
    queue.end();
    expect(ended).toEqual(['end']);
  });

  it('FrameDecoder.push holds nothing of the frames it returned', async () => {
    const decoder = new FrameDecoder();
    const joined = ((): WeakRef<ArrayBufferLike> => {
      const frame = encodeFrame({ type: 'response', body: Buffer.alloc(1024 * 1024, 3) });
      expect(decoder.push(Buffer.from(frame.subarray(0, 1000)))).toEqual([]);
      const [payload] = decoder.push(Buffer.from(frame.subarray(1000)));
      expect(payload!.length).toBe(frame.length - 4);
      return new WeakRef(payload!.buffer);
    })();
    await collect();
    expect(joined.deref()?.byteLength).toBeUndefined(); // collected (a size: it is still held)
    expect(decoder.idle).toBe(true);
  });
});

describe('frames read in place, cut at every byte', () => {
  /** Payloads of every frame `next` finds in `chunks`, as copies; the decoder must end idle with nothing unread. */
  function payloadsOf(chunks: Uint8Array[], max?: number): Buffer[] {
    const decoder = new FrameDecoder(max);
    const out: Buffer[] = [];
    for (const chunk of chunks) {
      decoder.feed(chunk);
      while (decoder.next()) {
        expect(decoder.frameEnd).toBeLessThanOrEqual(decoder.frameBytes.length);
        out.push(Buffer.from(decoder.frameBytes.subarray(decoder.frameStart, decoder.frameEnd)));
      }
      expect(decoder.unread).toBe(false);
    }
    expect(decoder.idle).toBe(true);
    return out;
  }

  /** A frame around any payload, one that is no message included (a zero-length one). */
  const frameOf = (payload: Buffer): Buffer => {
    const header = Buffer.alloc(4);
    header.writeUInt32BE(payload.length, 0);
    return Buffer.concat([header, payload]);
  };
  // A zero-length frame first, between others and last; a frame that spans chunks and completes mid-chunk.
  const payloads = [Buffer.alloc(0), Buffer.from('a'), Buffer.alloc(0), Buffer.alloc(40, 7), Buffer.from('xyz'), Buffer.alloc(0)];
  const stream = Buffer.concat(payloads.map(frameOf));

  it('two chunks cut at every position, and at every pair of positions, give every frame', () => {
    for (let i = 0; i <= stream.length; i++) {
      expect(payloadsOf([stream.subarray(0, i), stream.subarray(i)])).toEqual(payloads);
      for (let j = i; j <= stream.length; j++) {
        expect(payloadsOf([stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)])).toEqual(payloads);
      }
    }
  });

  it('one byte per chunk gives every frame', () => {
    expect(payloadsOf([...stream].map((byte) => Buffer.from([byte])))).toEqual(payloads);
  });

  it('a header over the limit after whole frames is refused wherever the chunks are cut, after the frames before it', () => {
    const refused = Buffer.concat([stream, frameOf(Buffer.alloc(100, 1)), frameOf(Buffer.from('after'))]);
    for (let i = 0; i <= refused.length; i++) {
      const decoder = new FrameDecoder(64);
      const out: Buffer[] = [];
      let error: unknown;
      try {
        for (const chunk of [refused.subarray(0, i), refused.subarray(i)]) {
          decoder.feed(chunk);
          while (decoder.next()) out.push(Buffer.from(decoder.frameBytes.subarray(decoder.frameStart, decoder.frameEnd)));
        }
      } catch (caught) {
        error = caught;
      }
      expect(error).toMatchObject({ code: 'FRAME_TOO_LARGE' });
      expect(out).toEqual(payloads); // every frame before it, none after
      expect(decoder.unread).toBe(false); // nothing after it is read
    }
  });
});
