import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { AgentError } from '../src/index.js';
import { encodeFrameSegments } from '../src/wire/codec.js';
import { FrameDecoder, decodePayload, encodeFrame, type WireMessage } from '../src/transport.js';

const samples: WireMessage[] = [
  { type: 'request', method: 'llm.generate', timeoutMs: 1500, priority: 'critical', metadata: { trace: 't1' }, body: { prompt: 'hi', bytes: Buffer.from([1, 2, 3]) }, mode: 'stream' },
  { type: 'request', method: 'echo', timeoutMs: null, priority: 'low', metadata: {}, body: null, mode: 'unary' },
  { type: 'response', body: [1, 'two', { three: 3 }] },
  { type: 'item', body: 'token' },
  { type: 'end' },
  { type: 'error', code: 'HANDLER_ERROR', message: 'boom' },
  { type: 'cancel', code: 'DEADLINE_EXCEEDED', message: 'late' },
  { type: 'ping', nonce: 7 },
  { type: 'pong', nonce: 7 },
];

function decodeAll(bytes: Uint8Array, max?: number): WireMessage[] {
  return new FrameDecoder(max).push(bytes).map((payload) => decodePayload(payload));
}

describe('frames', () => {
  it('round-trip every message type', () => {
    for (const message of samples) expect(decodeAll(encodeFrame(message))).toEqual([message]);
  });

  it('carry binary bodies as msgpack bin, not base64', () => {
    const body = Buffer.alloc(1000, 0xab);
    const frame = encodeFrame({ type: 'item', body });
    expect(frame.length).toBeLessThan(1000 + 16);
    expect(frame.includes(body)).toBe(true);
  });

  it('stay intact while later frames are encoded (frames are built inside the encoder buffer)', () => {
    // Frames are views of msgpackr's output buffer; a transport may hold one (queued behind flow control) while
    // thousands more are encoded, across many of the encoder's buffer changes, small and large.
    const held = samples.map((message) => ({ message, frame: encodeFrame(message) }));
    const copies = held.map(({ frame }) => Buffer.from(frame));
    for (let i = 0; i < 5000; i++) {
      encodeFrame({ type: 'item', body: i % 500 === 0 ? Buffer.alloc(200_000, i % 251) : `token ${i}`.repeat(1 + (i % 40)) });
    }
    held.forEach(({ message, frame }, i) => {
      expect(frame.equals(copies[i]!)).toBe(true);
      expect(decodeAll(frame)).toEqual([message]);
    });
  });

  it('reassemble across any chunking, one byte at a time included', () => {
    const stream = Buffer.concat(samples.map((m) => encodeFrame(m)));
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length }), { maxLength: 20 }), (cuts) => {
        const decoder = new FrameDecoder();
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const out: WireMessage[] = [];
        let last = 0;
        for (const point of [...points, stream.length]) {
          for (const p of decoder.push(stream.subarray(last, point))) out.push(decodePayload(p));
          last = point;
        }
        expect(out).toEqual(samples);
        expect(decoder.idle).toBe(true);
      }),
    );
  });

  it('refuse a frame over the limit from its header alone, before buffering it', () => {
    const decoder = new FrameDecoder(1024);
    const header = Buffer.from([0x7f, 0xff, 0xff, 0xff]);
    expect(() => decoder.push(header)).toThrowError(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
    expect(decoder.bufferedBytes).toBeLessThanOrEqual(4);
  });

  it('refuse to encode a message over the limit', () => {
    expect(() => encodeFrame({ type: 'item', body: Buffer.alloc(2048) }, 1024)).toThrowError(
      expect.objectContaining({ code: 'FRAME_TOO_LARGE' }),
    );
  });

  it('reject well-formed msgpack that is not a valid message with PROTOCOL_ERROR', () => {
    const packr = new Packr({ useRecords: false });
    for (const value of [[], [99], [1, 'm'], [1, '', null, 0, {}, null, 0], [1, 'm', -5, 0, {}, null, 0], [5, 'X', 3], { a: 1 }, 'str', [7, -1]]) {
      expect(() => decodePayload(packr.pack(value))).toThrowError(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
    }
  });

  it('maps unknown error codes from newer peers to UNKNOWN instead of failing', () => {
    const message = decodePayload(new Packr({ useRecords: false }).pack([5, 'SOMETHING_NEW', 'x']));
    expect(message).toEqual({ type: 'error', code: 'UNKNOWN', message: 'x' });
  });
});

const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);

// A fixed amount of CPU work per property: on a loaded 2-core machine (CI beside other jobs, two CPU burners)
// one property took over 30 s, the default test timeout. The work is bounded by FUZZ_RUNS, so the timeout only
// has to catch a hang.
describe(`frame decoder fuzz (${FUZZ_RUNS} runs each)`, { timeout: 300_000 }, () => {
  const MAX = 64 * 1024;

  /** Only typed errors, never a crash; buffered bytes never exceed the limit. */
  function feed(chunks: Uint8Array[]): void {
    const decoder = new FrameDecoder(MAX);
    for (const chunk of chunks) {
      let payloads: Uint8Array[];
      try {
        payloads = decoder.push(chunk);
      } catch (error) {
        expect(error).toBeInstanceOf(AgentError);
        expect((error as AgentError).code).toBe('FRAME_TOO_LARGE');
        return;
      }
      expect(decoder.bufferedBytes).toBeLessThanOrEqual(MAX + 4);
      for (const payload of payloads) {
        try {
          decodePayload(payload);
        } catch (error) {
          expect(error).toBeInstanceOf(AgentError);
          expect((error as AgentError).code).toBe('PROTOCOL_ERROR');
        }
      }
    }
  }

  it('random bytes', () => {
    fc.assert(fc.property(fc.array(fc.uint8Array({ maxLength: 512 }), { maxLength: 8 }), feed), { numRuns: FUZZ_RUNS });
  });

  it('random payloads behind valid length headers', () => {
    const framed = fc.uint8Array({ maxLength: 256 }).map((payload) => {
      const frame = Buffer.alloc(4 + payload.length);
      frame.writeUInt32BE(payload.length, 0);
      frame.set(payload, 4);
      return frame;
    });
    fc.assert(fc.property(fc.array(framed, { maxLength: 8 }), feed), { numRuns: FUZZ_RUNS });
  });

  it('valid frames with mutated bytes', () => {
    const valid = Buffer.concat(samples.map((m) => encodeFrame(m)));
    const mutation = fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(mutation, fc.nat(valid.length), (edits, cut) => {
        const bytes = Buffer.from(valid);
        for (const [index, value] of edits) bytes[index] = value;
        feed([bytes.subarray(0, cut), bytes.subarray(cut)]);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });
});

describe('zero-copy binary frames', () => {
  it('split large binary item/response bodies into a header and the body itself, decoding to the same message', () => {
    for (const type of ['item', 'response'] as const) {
      const body = Buffer.alloc(20_000, 5);
      const segments = encodeFrameSegments({ type, body });
      expect(segments).toHaveLength(2);
      expect(segments[1]).toBe(body);
      const joined = Buffer.concat(segments);
      const [message] = decodeAll(joined);
      expect(message?.type).toBe(type);
      expect(Buffer.from((message as { body: Uint8Array }).body).equals(body)).toBe(true);
      // bin 32 where msgpackr would pick bin 16: a few bytes longer, equally valid MessagePack.
      expect(joined.length - encodeFrame({ type, body }).length).toBeLessThanOrEqual(2);
    }
  });

  it('keep small or non-binary bodies in one segment and enforce the limit on split ones', () => {
    expect(encodeFrameSegments({ type: 'item', body: Buffer.alloc(100) })).toHaveLength(1);
    expect(encodeFrameSegments({ type: 'item', body: 'x'.repeat(20_000) })).toHaveLength(1);
    expect(() => encodeFrameSegments({ type: 'item', body: Buffer.alloc(20_000) }, 10_000)).toThrowError(
      expect.objectContaining({ code: 'FRAME_TOO_LARGE' }),
    );
  });
});
