import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { AgentError } from '../src/index.js';
import { MAX_CONTAINERS_PER_FRAME, MAX_NESTING_DEPTH, checkMsgpackShape } from '../src/wire/msgpack-shape.js';
import {
  DEFAULT_MAX_FRAME_SIZE,
  FrameDecoder,
  decodePayload,
  encodeFrame,
  type WireMessage,
} from '../src/transport.js';
import { tupleToMessage } from '../src/wire/messages.js';
import { containerFloodPayload, deepPayload, frame } from './fuzz/inputs.js';
import { runFuzz } from './fuzz/run.js';

const gc = (globalThis as { gc?: () => void }).gc!;
const plain = new Packr({ useRecords: false, moreTypes: false });

function protocolError(run: () => unknown): AgentError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('PROTOCOL_ERROR');
    return error as AgentError;
  }
  throw new Error('expected a PROTOCOL_ERROR, nothing was thrown');
}

const hex = (text: string): Buffer => Buffer.from(text.replace(/\s+/g, ''), 'hex');

describe('frame decoder memory: nothing allocated for a declared length', () => {
  it('holds one byte, not 16 MiB, for each of 200 decoders fed a 16 MiB + 1 KiB header and one byte', () => {
    const declared = 16 * 1024 * 1024 + 1024;
    gc();
    const before = process.memoryUsage();
    const decoders = Array.from({ length: 200 }, () => new FrameDecoder(declared));
    for (const decoder of decoders) {
      const header = Buffer.alloc(5);
      header.writeUInt32BE(declared, 0);
      expect(decoder.push(header)).toEqual([]);
      expect(decoder.bufferedBytes).toBe(5);
      expect(decoder.idle).toBe(false);
    }
    gc();
    const after = process.memoryUsage();
    // Allocating the declared lengths would be 200 × 16 MiB = 3.2 GB; allow 16 MiB of noise in all.
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(16 * 1024 * 1024);
    expect(after.rss - before.rss).toBeLessThan(64 * 1024 * 1024);
    expect(decoders).toHaveLength(200);
  });

  it('keeps memory near the bytes received when a peer trickles a large frame one byte at a time', () => {
    const decoder = new FrameDecoder();
    const header = Buffer.alloc(4);
    header.writeUInt32BE(DEFAULT_MAX_FRAME_SIZE, 0);
    decoder.push(header);
    gc();
    const before = process.memoryUsage().arrayBuffers;
    const byte = Buffer.from([0x42]);
    for (let i = 0; i < 64 * 1024; i++) decoder.push(byte);
    gc();
    expect(decoder.bufferedBytes).toBe(4 + 64 * 1024);
    // 64 KiB received: the staging buffers hold at most about twice that, never the declared 16 MiB.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(1024 * 1024);
  });

  it('joins a frame from one-byte, small and large chunks into the same bytes', () => {
    const body = Buffer.alloc(300_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 31) & 0xff;
    const stream = encodeFrame({ type: 'item', body });
    const decoder = new FrameDecoder();
    const out: Uint8Array[] = [];
    let offset = 0;
    // 1-byte pieces (staged), then 1 KiB (staged), then 50 KiB views of one big buffer (kept or copied), then the rest.
    for (const size of [...Array<number>(100).fill(1), ...Array<number>(20).fill(1024), 50_000, 50_000, 100_000]) {
      out.push(...decoder.push(stream.subarray(offset, offset + size)));
      offset += size;
      expect(decoder.bufferedBytes).toBe(offset);
    }
    out.push(...decoder.push(stream.subarray(offset)));
    expect(out).toHaveLength(1);
    expect(decoder.idle).toBe(true);
    expect(decoder.bufferedBytes).toBe(0);
    const message = decodePayload(out[0]!) as { type: 'item'; body: Uint8Array };
    expect(Buffer.from(message.body).equals(body)).toBe(true);
  });

  it('reassembles frames of any size from any cuts, pieces kept as views, staged or moved (property)', () => {
    const cut = fc.record({
      sizes: fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 1, maxLength: 3 }),
      cuts: fc.array(fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 70_000 })), { maxLength: 40 }),
      copy: fc.boolean(),
    });
    fc.assert(
      fc.property(cut, ({ sizes, cuts, copy }) => {
        const payloads = sizes.map((size, n) => Buffer.alloc(size, n + 1).fill(n * 7 + 3, 0, Math.min(size, 9)));
        const stream = Buffer.concat(payloads.map((payload) => frame(payload)));
        const decoder = new FrameDecoder();
        const out: Buffer[] = [];
        let offset = 0;
        for (const size of [...cuts, stream.length]) {
          const piece = stream.subarray(offset, Math.min(stream.length, offset + size));
          // Copies are whole buffers (kept as views); subarrays of the stream pin it (so they are copied).
          for (const frame of decoder.push(copy ? Buffer.from(piece) : piece)) out.push(Buffer.from(frame));
          offset += piece.length;
          if (offset >= stream.length) break;
        }
        // Buffer.equals: vitest's deep equality walks 200 KB buffers element by element.
        expect(out.length).toBe(payloads.length);
        expect(out.every((bytes, n) => bytes.equals(payloads[n]!))).toBe(true);
        expect(decoder.idle).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('returns an empty payload for a zero-length frame whose header came in pieces', () => {
    const decoder = new FrameDecoder();
    expect(decoder.push(Buffer.from([0, 0]))).toEqual([]);
    expect(decoder.bufferedBytes).toBe(2);
    const frames = decoder.push(Buffer.from([0, 0, 0, 0, 0, 1, 0xc0]));
    expect(frames.map((f) => Buffer.from(f).toString('hex'))).toEqual(['', 'c0']);
    expect(decoder.idle).toBe(true);
  });
});

describe('decode limits: a frame costs time linear in its bytes', () => {
  it(`rejects nesting deeper than ${MAX_NESTING_DEPTH} with PROTOCOL_ERROR, 100,000-deep arrays and maps included`, () => {
    for (const kind of ['array', 'map'] as const) {
      const error = protocolError(() => decodePayload(deepPayload(100_000, kind)));
      expect(error.message).toMatch(/nesting deeper than 32/);
    }
  });

  it('accepts a body nested to the limit (the message array is level 1) and refuses one level more', () => {
    const nested = (levels: number): unknown => (levels === 0 ? 'leaf' : [nested(levels - 1)]);
    const atLimit = decodePayload(encodeFrame({ type: 'item', body: nested(MAX_NESTING_DEPTH - 1) }).subarray(4));
    expect(atLimit).toEqual({ type: 'item', body: nested(MAX_NESTING_DEPTH - 1) });
    protocolError(() => decodePayload(encodeFrame({ type: 'item', body: nested(MAX_NESTING_DEPTH) }).subarray(4)));
    // Configurable per call: a tighter depth refuses what the default accepts.
    expect(() => checkMsgpackShape(plain.pack([3, [[1]]]), { maxDepth: 2, maxContainers: 100 })).toThrowError(/nesting deeper than 2/);
  });

  it(`refuses more than ${MAX_CONTAINERS_PER_FRAME} arrays and maps in one frame`, () => {
    expect(decodePayload(containerFloodPayload(MAX_CONTAINERS_PER_FRAME - 2)).type).toBe('item'); // + message + body array
    const error = protocolError(() => decodePayload(containerFloodPayload(MAX_CONTAINERS_PER_FRAME)));
    expect(error.message).toMatch(/more than 262144 arrays and maps/);
  });

  it('refuses declared lengths longer than the bytes left, before anything is allocated for them', () => {
    for (const field of ['dd ffffffff', 'df ffffffff', 'dc ffff', 'de 0100', 'c6 ffffffff', 'c5 0100', 'db 7fffffff', 'd9 20', '9f', '8f', 'a5']) {
      const error = protocolError(() => decodePayload(hex(`92 03 ${field} c0c0c0`)));
      expect(error.message).toMatch(/runs past the end|truncated/);
    }
  });

  it('refuses every extension type, timestamps included, and the unused 0xc1', () => {
    const extensions = ['d4 01 00', 'd5 01 0000', 'd6 ff 00000000', 'd7 ff 0000000000000000', 'd8 05' + ' 00'.repeat(16), 'c7 01 05 00', 'c8 0001 05 00', 'c9 00000001 05 00'];
    for (const ext of extensions) {
      const error = protocolError(() => decodePayload(hex(`92 03 ${ext}`)));
      expect(error.message).toMatch(/extension type 0x(d[4-8]|c[7-9])/);
    }
    // A Date as a default msgpackr encoder sends it: the timestamp extension (-1).
    const withDate = new Packr({ useRecords: false }).pack([3, new Date(0)]);
    expect(protocolError(() => decodePayload(withDate)).message).toMatch(/extension type/);
    protocolError(() => decodePayload(hex('92 03 c1')));
  });

  it('refuses trailing bytes after the message', () => {
    expect(protocolError(() => decodePayload(hex('91 04 c0'))).message).toMatch(/1 trailing bytes/);
  });

  it('decodes 64-bit integers as numbers, never BigInt', () => {
    const item = (bytes: string): unknown => (decodePayload(hex(`92 03 ${bytes}`)) as { body: unknown }).body;
    expect(item('cf ffffffffffffffff')).toBe(2 ** 64);
    expect(item('d3 8000000000000000')).toBe(-(2 ** 63));
    expect(item('cf 001fffffffffffff')).toBe(Number.MAX_SAFE_INTEGER);
    expect(item('d3 ffffffffffffffff')).toBe(-1);
    // Beyond 2^53 a nonce is not a safe integer: the message is refused, not handed on as a BigInt.
    protocolError(() => decodePayload(hex('92 07 cf ffffffffffffffff')));
  });

  it('accepts every value the encoder produces within the limits (property)', () => {
    const body = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', maxDepth: 10, withCrossShrink: true },
        fc.constant(null),
        fc.boolean(),
        fc.integer(),
        fc.double({ noNaN: true }),
        fc.maxSafeInteger(),
        fc.string(),
        fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
        fc.array(tie('value'), { maxLength: 5 }),
        fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 5 }),
      ),
    })).value;
    fc.assert(
      fc.property(body, (value) => {
        const message: WireMessage = { type: 'item', body: value };
        const payload = encodeFrame(message).subarray(4);
        expect(() => checkMsgpackShape(payload)).not.toThrow();
        expect(decodePayload(payload)).toEqual({ type: 'item', body: plain.unpack(plain.pack(value)) });
      }),
      { numRuns: 500 },
    );
  });
});

describe('prototype keys', () => {
  it('give PROTOCOL_ERROR when they are the message type, never a TypeError', () => {
    for (const key of ['constructor', 'toString', '__proto__', 'valueOf', 'hasOwnProperty']) {
      expect(tupleToMessage([key, 'x'])).toBeUndefined();
      protocolError(() => decodePayload(plain.pack([key, 'x'])));
      protocolError(() => decodePayload(plain.pack([key])));
    }
    protocolError(() => decodePayload(plain.pack(['1', 'x'])));
  });

  it('in request metadata arrive as plain own keys and set no prototype', () => {
    // [1, "m", nil, 2, {"__proto__": "v", "constructor": "c"}, nil, 0], written by hand: an encoder would not.
    const payload = hex('97 01 a1 6d c0 02 82 a9 5f5f70726f746f5f5f a1 76 ab 636f6e7374727563746f72 a1 63 c0 00');
    const message = decodePayload(payload);
    expect(message.type).toBe('request');
    const metadata = (message as { metadata: Record<string, string> }).metadata;
    expect(Object.getPrototypeOf(metadata)).toBe(Object.prototype);
    // msgpackr renames `__proto__` to `__proto_`; `constructor` stays an own string.
    expect(Object.entries(metadata)).toEqual([
      ['__proto_', 'v'],
      ['constructor', 'c'],
    ]);
    expect(({} as Record<string, unknown>).v).toBeUndefined();
  });

  it('in bodies cannot pollute Object.prototype or set a prototype', () => {
    // [3, {"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}]
    const payload = hex(
      '92 03 82 a9 5f5f70726f746f5f5f 81 a8 706f6c6c75746564 c3 ab 636f6e7374727563746f72 81 a9 70726f746f74797065 81 a8 706f6c6c75746564 c3',
    );
    const body = (decodePayload(payload) as { body: Record<string, unknown> }).body;
    expect(Object.getPrototypeOf(body)).toBe(Object.prototype);
    expect(body.polluted).toBeUndefined();
    expect(Object.keys(body)).toEqual(['__proto_', 'constructor']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(Object.prototype)).toEqual([]);
  });
});

const FUZZ_INPUTS = Number(process.env.FUZZ_INPUTS ?? 20_000);

describe(`decoder path fuzz (${FUZZ_INPUTS} inputs, seed 14)`, () => {
  it('throws only AgentErrors, decodes only plain data and keeps the heap bounded', () => {
    gc();
    const before = process.memoryUsage().heapUsed;
    const report = runFuzz({ count: FUZZ_INPUTS, seed: 14 });
    gc();
    const growth = process.memoryUsage().heapUsed - before;
    expect(report.failures).toEqual([]);
    expect(Object.keys(report.errorsByCode).sort()).toEqual(['FRAME_TOO_LARGE', 'PROTOCOL_ERROR']);
    expect(report.messages).toBeGreaterThan(FUZZ_INPUTS / 20); // the valid and lightly mutated ones decode
    for (const kind of ['mutated', 'valid', 'random', 'huge-length', 'extension', 'prototype-key', 'int64', 'deep']) {
      expect(report.inputsByKind[kind]).toBeGreaterThan(0);
    }
    // The report keeps one float per input; beyond that the heap must not grow.
    expect(growth).toBeLessThan(16 * 1024 * 1024 + FUZZ_INPUTS * 8);
  });
});

describe('undefined', () => {
  it('goes out as nil, and the msgpackr encoding earlier versions sent (d4 00 00) is still accepted', () => {
    const sent = encodeFrame({ type: 'request', method: 'm', timeoutMs: null, priority: 'normal', metadata: {}, body: undefined, mode: 'unary' });
    expect([...sent.subarray(4)]).not.toContain(0xd4);
    // [1, "m", nil, 2, {}, <msgpackr undefined>, 0]: a body-less call from an earlier agentlink
    const legacy = Buffer.from([0x97, 0x01, 0xa1, 0x6d, 0xc0, 0x02, 0x80, 0xd4, 0x00, 0x00, 0x00]);
    expect(decodePayload(legacy)).toMatchObject({ type: 'request', method: 'm', body: undefined });
    // Any other extension is still refused.
    expect(() => decodePayload(Buffer.from([0x97, 0x01, 0xa1, 0x6d, 0xc0, 0x02, 0x80, 0xd4, 0x01, 0x00, 0x00]))).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
  });
});
