import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { codecPackr as packr, expectFastReadAgrees, generalDecode, mutatedPayloads } from './wire-paths.js';
import { decodeBinaryFrame, encodeBinaryFrame } from '../src/wire/binary-frames.js';
import { decodePayload, encodeFrame, FRAME_HEADER_BYTES, unpackPayload } from '../src/wire/codec.js';
import { MAX_PLAIN_BYTES, MAX_PLAIN_CONTAINERS, MAX_PLAIN_DEPTH } from '../src/wire/plain-values.js';
import { MODES, PRIORITIES, messageToTuple, tupleToMessage, type WireMessage } from '../src/wire/messages.js';

/** Deep equality that also requires bytes to be of the same class (msgpackr gives Buffer views of a Buffer). */
function expectSame(actual: unknown, expected: unknown): void {
  expect(actual).toEqual(expected);
  const classes = (value: unknown, out: string[] = []): string[] => {
    if (value instanceof Uint8Array) out.push(value.constructor.name);
    else if (Array.isArray(value)) for (const item of value) classes(item, out);
    else if (value !== null && typeof value === 'object') for (const item of Object.values(value)) classes(item, out);
    return out;
  };
  expect(classes(actual)).toEqual(classes(expected));
}

const request = (body: unknown, overrides: Partial<Extract<WireMessage, { type: 'request' }>> = {}): WireMessage => ({
  type: 'request',
  method: 'download',
  timeoutMs: null,
  priority: 'normal',
  metadata: {},
  body,
  mode: 'stream',
  ...overrides,
});

const numbers = fc.oneof(
  fc.integer({ min: -40, max: 300 }),
  fc.integer(),
  fc.constantFrom(0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffff_ffff, 2 ** 32, -0x20, -0x21, -0x80, -0x81, -0x8000, -0x8001, -(2 ** 31), -(2 ** 31) - 1, 2 ** 53, -0, 0.5, -1.5, Number.NaN, Infinity, -Infinity, Number.MAX_VALUE, Number.MIN_VALUE),
  fc.double(),
);
const texts = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ maxLength: 8, unit: 'binary' }),
  fc.string({ maxLength: 3, unit: 'grapheme' }),
  fc.constantFrom(31, 32, 255, 256, 300).map((n) => 'a'.repeat(n)),
);
const keys = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'hasOwnProperty', '1', 'é', 'k'.repeat(40)));
const leaves = fc.oneof(
  numbers,
  texts,
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  fc.uint8Array({ maxLength: 20 }),
  fc.date(),
  fc.bigInt({ min: -5n, max: 5n }),
);
/** JSON-like values (and bytes, and a few things the fast path leaves to msgpackr), nested a little. */
const values: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaves,
    fc.array(tie('value'), { maxLength: 20 }),
    // Built by assignment, as JSON.parse builds them: a '__proto__' key is then an own key.
    fc.array(fc.tuple(keys, tie('value')), { maxLength: 20 }).map((entries) => {
      const object = JSON.parse('{}') as Record<string, unknown>;
      for (const [key, value] of entries) Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
      return object;
    }),
  ),
})).value;

describe('a request with a plain body (written and read without msgpackr)', () => {
  it('writes the bytes msgpackr writes, and reads back what the general path reads', () => {
    fc.assert(
      fc.property(values, fc.constantFrom(...MODES), fc.constantFrom(...PRIORITIES), (body, mode, priority) => {
        const message = request(body, { mode, priority });
        let reference: Buffer;
        try {
          reference = packr.pack(messageToTuple(message));
        } catch {
          return; // msgpackr cannot write it either (a bigint past 64 bits): the codec throws INVALID_ARGUMENT
        }
        const fast = encodeBinaryFrame(message);
        if (fast !== undefined) expect(Buffer.compare(fast.subarray(FRAME_HEADER_BYTES), reference)).toBe(0);
        if (generalDecode(reference) === undefined) {
          // msgpackr wrote an extension (a Date), which no reader takes: the codec refuses it where it is written.
          expect(fast).toBeUndefined();
          expect(() => encodeFrame(message)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
          return;
        }
        const payload = encodeFrame(message).subarray(FRAME_HEADER_BYTES);
        const general = generalDecode(payload);
        expectSame(decodePayload(payload), general);
        const direct = decodeBinaryFrame(payload);
        if (direct !== undefined) expectSame(direct, general);
      }),
      { numRuns: 1500 },
    );
  });

  it('takes a streamed call\'s usual request: an object of numbers and ASCII text, no body, nested containers', () => {
    for (const body of [
      { total: 16_000, chunk: 16, delayMs: 0 },
      { prompt: 'Write a haiku about loopback.', maxTokens: 256, temperature: 0.7, stop: ['\n\n'], stream: true },
      undefined,
      null,
      'text',
      [1, -1, 2.5, { a: [null, true, false] }],
    ]) {
      const frame = encodeBinaryFrame(request(body));
      expect(frame, JSON.stringify(body)).toBeDefined();
      const payload = frame!.subarray(FRAME_HEADER_BYTES);
      expect(decodeBinaryFrame(payload)).toEqual(request(body ?? null));
      expect(generalDecode(Buffer.from(payload))).toEqual(request(body ?? null));
    }
  });

  it('leaves to msgpackr what it does not take: non-ASCII text, other classes, too deep, too many containers, too large', () => {
    const nested = (depth: number): unknown => (depth === 0 ? 1 : [nested(depth - 1)]);
    for (const body of [
      { text: 'héllo' },
      { ['ké']: 1 },
      new Date(0),
      new Map([[1, 2]]),
      Object.create(null),
      { hasOwnProperty: 1 },
      { f: () => undefined },
      [1n],
      nested(MAX_PLAIN_DEPTH + 1),
      Array.from({ length: MAX_PLAIN_CONTAINERS + 1 }, () => []),
      'a'.repeat(MAX_PLAIN_BYTES),
      new Uint16Array(2),
    ]) {
      expect(encodeBinaryFrame(request(body))).toBeUndefined();
    }
    expect(encodeBinaryFrame(request(nested(MAX_PLAIN_DEPTH)))).toBeDefined();
    expect(encodeBinaryFrame(request(Array.from({ length: MAX_PLAIN_CONTAINERS - 1 }, () => [])))).toBeDefined();
    // Read back by the general path, the same as before
    const deep = encodeFrame(request(nested(MAX_PLAIN_DEPTH + 1))).subarray(FRAME_HEADER_BYTES);
    expect(decodeBinaryFrame(deep)).toBeUndefined();
    expect(decodePayload(deep)).toEqual(request(nested(MAX_PLAIN_DEPTH + 1)));
  });

  it('reads a getter once, as msgpackr does', () => {
    let reads = 0;
    const body = {
      get changing(): string {
        reads++;
        return 'x'.repeat(reads);
      },
    };
    const frame = encodeBinaryFrame(request(body))!;
    expect(reads).toBe(1);
    expect(decodeBinaryFrame(frame.subarray(FRAME_HEADER_BYTES))).toEqual(request({ changing: 'x' }));
  });

  it('writes a body whose getter encodes another request meanwhile (that one through msgpackr), each whole', () => {
    let inner: Buffer | undefined;
    const body = {
      a: 'outer',
      get b(): number {
        inner = encodeFrame(request({ c: 'inner', d: [1, 2, 3] }));
        return 7;
      },
      e: 'after',
    };
    const outer = encodeFrame(request(body));
    expect(decodePayload(outer.subarray(FRAME_HEADER_BYTES))).toEqual(request({ a: 'outer', b: 7, e: 'after' }));
    expect(decodePayload(inner!.subarray(FRAME_HEADER_BYTES))).toEqual(request({ c: 'inner', d: [1, 2, 3] }));
  });

  it('never accepts what the general path refuses, nor reads it differently: cut, extended and mutated frames', () => {
    const encoded = values.map((body) => {
      try {
        return Buffer.from(encodeFrame(request(body)).subarray(FRAME_HEADER_BYTES));
      } catch {
        return Buffer.from(encodeFrame(request({ a: 1 })).subarray(FRAME_HEADER_BYTES));
      }
    });
    fc.assert(
      fc.property(mutatedPayloads(encoded), fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ minLength: 1, maxLength: 8 }), (payload, before, after) =>
        expectFastReadAgrees(payload, before, after, expectSame),
      ),
      { numRuns: 3000 },
    );
  });

  it('holds a stricter decoder\'s limits: a body nested past them, or with more containers, is refused as the general path refuses it', () => {
    const payload = encodeFrame(request({ a: { b: { c: 1 } } })).subarray(FRAME_HEADER_BYTES);
    const limits = { maxDepth: 3, maxContainers: 100 };
    expect(decodeBinaryFrame(payload, 0, payload.length, undefined, limits)).toBeUndefined();
    expect(() => decodePayload(payload, limits)).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
    // The request's array and its metadata map count too: 5 containers in all.
    const few = { maxDepth: 4, maxContainers: 4 };
    expect(decodeBinaryFrame(payload, 0, payload.length, undefined, few)).toBeUndefined();
    expect(() => decodePayload(payload, few)).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
    const enough = { maxDepth: 4, maxContainers: 5 };
    expect(decodeBinaryFrame(payload, 0, payload.length, undefined, enough)).toEqual(request({ a: { b: { c: 1 } } }));
    expect(decodePayload(payload, enough)).toEqual(request({ a: { b: { c: 1 } } }));
    fc.assert(
      fc.property(values, fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 12 }), (body, maxDepth, maxContainers) => {
        let bytes: Buffer;
        try {
          bytes = Buffer.from(encodeFrame(request(body)).subarray(FRAME_HEADER_BYTES));
        } catch {
          return;
        }
        const limits = { maxDepth, maxContainers };
        const direct = decodeBinaryFrame(bytes, 0, bytes.length, undefined, limits);
        let general: WireMessage | undefined;
        try {
          general = tupleToMessage(unpackPayload(bytes, limits));
        } catch {
          general = undefined;
        }
        if (general === undefined) expect(direct).toBeUndefined();
        else if (direct !== undefined) expectSame(direct, general);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('a plain body the fast path must not misread on the write side', () => {
  it('writes an object whose own "constructor" names a bytes class as msgpackr does (a map), not as bytes', () => {
    for (const body of [
      { constructor: Uint8Array },
      { constructor: Buffer, length: 2, 0: 7, 1: 9 },
      { a: [{ constructor: Uint8Array, length: -1 }] },
    ]) {
      const message = request(body);
      const reference = packr.pack(messageToTuple(message));
      const fast = encodeBinaryFrame(message);
      if (fast !== undefined) expect(fast.subarray(FRAME_HEADER_BYTES).toString('hex')).toBe(reference.toString('hex'));
      expect(encodeFrame(message).subarray(FRAME_HEADER_BYTES).toString('hex')).toBe(reference.toString('hex'));
    }
  });

  it('refuses a body whose getter or Proxy throws with INVALID_ARGUMENT, as msgpackr\'s path does', () => {
    const thrown = new RangeError('boom');
    for (const body of [
      {
        get a(): number {
          throw thrown;
        },
      },
      { list: [new Proxy(new Uint8Array(2), {})] },
      new Proxy({ a: 1 }, {
        ownKeys() {
          throw thrown;
        },
      }),
    ]) {
      expect(() => encodeFrame(request(body))).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });
});

/**
 * MessagePack a peer may write for a body, in any of the encodings a value may take (not only msgpackr's
 * smallest): str 8/16 for short text, map 16 or fixmap for small maps, wider integers for small values, floats for
 * integers, duplicate and special keys. The fast reader must take them as the general path reads them, or not at all.
 */
const anyEncoding: fc.Arbitrary<Buffer> = fc.letrec<{ value: Buffer }>((tie) => {
  const byte = (...bytes: number[]) => Buffer.from(bytes);
  const u16 = (n: number) => byte(n >> 8, n & 0xff);
  const ascii = fc.oneof(fc.string({ maxLength: 40, unit: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)) }), fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', '0', '1', 'a'));
  const text = fc.tuple(fc.oneof(ascii, fc.string({ maxLength: 4 })), fc.constantFrom('fix', 'str8', 'str16')).map(([s, how]) => {
    const bytes = Buffer.from(s, 'utf8');
    if (how === 'fix' && bytes.length < 32) return Buffer.concat([byte(0xa0 | bytes.length), bytes]);
    if (how !== 'str16' && bytes.length < 256) return Buffer.concat([byte(0xd9, bytes.length), bytes]);
    return Buffer.concat([byte(0xda), u16(bytes.length), bytes]);
  });
  const integer = fc.tuple(fc.oneof(fc.integer({ min: -200, max: 300 }), fc.integer(), fc.constantFrom(-0x80, -0x81, 0x7fff, -0x8000, 0xffff, 2 ** 31 - 1, -(2 ** 31))), fc.nat(9)).map(([n, pick]) => {
    const b = Buffer.alloc(9);
    const forms: Buffer[] = [];
    if (n >= 0 && n < 0x80) forms.push(byte(n));
    if (n >= -32 && n < 0) forms.push(byte(n & 0xff));
    if (n >= 0 && n < 0x100) forms.push(byte(0xcc, n));
    if (n >= 0 && n < 0x10000) forms.push(Buffer.concat([byte(0xcd), u16(n)]));
    if (n >= 0 && n <= 0xffff_ffff) (b.writeUInt32BE(n, 1), (b[0] = 0xce), forms.push(Buffer.from(b.subarray(0, 5))));
    if (n >= -0x80 && n < 0x80) forms.push(byte(0xd0, n & 0xff));
    if (n >= -0x8000 && n < 0x8000) (b.writeInt16BE(n, 1), (b[0] = 0xd1), forms.push(Buffer.from(b.subarray(0, 3))));
    if (n >= -(2 ** 31) && n < 2 ** 31) (b.writeInt32BE(n, 1), (b[0] = 0xd2), forms.push(Buffer.from(b.subarray(0, 5))));
    b[0] = 0xcb;
    b.writeDoubleBE(n, 1);
    forms.push(Buffer.from(b));
    return forms[pick % forms.length]!;
  });
  const float = fc.oneof(fc.double(), fc.constantFrom(-0, Number.NaN, Infinity)).map((x) => {
    const b = Buffer.alloc(9);
    b[0] = 0xcb;
    b.writeDoubleBE(x, 1);
    return b;
  });
  const bin = fc.tuple(fc.uint8Array({ maxLength: 20 }), fc.boolean()).map(([bytes, wide]) =>
    Buffer.concat([wide ? Buffer.concat([byte(0xc5), u16(bytes.length)]) : byte(0xc4, bytes.length), bytes]),
  );
  const leaf = fc.oneof(text, integer, float, bin, fc.constantFrom(byte(0xc0), byte(0xc2), byte(0xc3), byte(0xca, 0, 0, 0, 0), byte(0xc1)));
  const array = fc.tuple(fc.array(tie('value'), { maxLength: 18 }), fc.boolean()).map(([items, wide]) =>
    Buffer.concat([wide || items.length >= 16 ? Buffer.concat([byte(0xdc), u16(items.length)]) : byte(0x90 | items.length), ...items]),
  );
  const map = fc.tuple(fc.array(fc.tuple(fc.oneof(text, integer), tie('value')), { maxLength: 18 }), fc.boolean()).map(([entries, wide]) =>
    Buffer.concat([wide || entries.length >= 16 ? Buffer.concat([byte(0xde), u16(entries.length)]) : byte(0x80 | entries.length), ...entries.flat()]),
  );
  return { value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, array, map) };
}).value;

describe('a plain body in any encoding a peer may write', () => {
  it('is read by the fast path as the general path reads it, or left to it, within any limits', () => {
    const head = Buffer.from('9701a46d657468c002de0000', 'hex'); // request "meth", no deadline, normal, {}
    let taken = 0;
    fc.assert(
      fc.property(anyEncoding, fc.constantFrom(0, 1, 3, 4), fc.uint8Array({ maxLength: 2 }), fc.integer({ min: 2, max: 40 }), fc.integer({ min: 2, max: 300 }), (body, mode, trailing, maxDepth, maxContainers) => {
        const payload = Buffer.concat([head, body, Buffer.from([mode]), trailing]);
        for (const limits of [undefined, { maxDepth, maxContainers }]) {
          const direct = decodeBinaryFrame(payload, 0, payload.length, undefined, limits);
          let general: WireMessage | undefined;
          try {
            general = tupleToMessage(unpackPayload(payload, limits));
          } catch {
            general = undefined;
          }
          if (general === undefined) expect(direct).toBeUndefined();
          else if (direct !== undefined) {
            taken++;
            expectSame(direct, general);
            // From a Uint8Array that is no Buffer (its text made another way), the same values.
            const plainBytes = (_k: string, v: unknown) => (v instanceof Uint8Array ? [...v] : (v as { type?: string })?.type === 'Buffer' ? (v as { data: number[] }).data : v);
            expect(JSON.stringify(decodeBinaryFrame(new Uint8Array(payload), 0, payload.length, undefined, limits), plainBytes)).toBe(JSON.stringify(direct, plainBytes));
            // Same own keys in the same order (toEqual ignores order), -0 and NaN kept.
            expect(JSON.stringify(direct, (_k, v: unknown) => (Object.is(v, -0) ? '-0' : Number.isNaN(v) ? 'NaN' : v))).toBe(
              JSON.stringify(general, (_k, v: unknown) => (Object.is(v, -0) ? '-0' : Number.isNaN(v) ? 'NaN' : v)),
            );
          }
        }
      }),
      { numRuns: 3000 },
    );
    expect(taken, `${taken}`).toBeGreaterThan(300); // the fast path read a good share of them (not a property about nothing)
  });
});

describe('what a peer\'s plain body costs to read', () => {
  /** Heap held by what `read` returns (the results are kept alive while measured). */
  function heapHeldBy(read: () => unknown): { held: number; result: unknown } {
    const before = process.memoryUsage().heapUsed;
    const result = read();
    return { held: process.memoryUsage().heapUsed - before, result };
  }

  // Text read a character at a time (`text += char`) is a chain of cons strings, ~30 heap bytes per byte of frame:
  // a 15 MB request of long ASCII strings held ~470 MB (msgpackr's flat strings: ~18 MB), past the ~16 MiB per
  // frame that the container bound keeps decoding to (docs/security.md).
  it('holds about the frame\'s size in heap, not tens of times it: one large frame, or many small ones', () => {
    const head = Buffer.from('9701a46d657468c002de0000', 'hex');
    const long = Buffer.concat([Buffer.from([0xd9, 255]), Buffer.alloc(255, 0x61)]);
    const count = 60_000;
    const large = Buffer.concat([head, Buffer.from([0xdc, count >> 8, count & 0xff]), ...Array.from({ length: count }, () => long), Buffer.from([1])]);
    const one = heapHeldBy(() => decodePayload(large));
    expect(((one.result as { body: unknown[] }).body).length).toBe(count);
    expect(one.held).toBeLessThan(5 * large.length);

    // Bodies the fast path takes (below MAX_PLAIN_BYTES): 2,000 of 30 strings of 255 characters.
    const small = Buffer.concat([head, Buffer.from([0xdc, 0, 30]), ...Array.from({ length: 30 }, () => long), Buffer.from([1])]);
    expect(decodeBinaryFrame(small)).toBeDefined();
    const many = heapHeldBy(() => Array.from({ length: 2000 }, () => decodePayload(Buffer.from(small))));
    expect((many.result as unknown[]).length).toBe(2000);
    expect(many.held).toBeLessThan(5 * 2000 * small.length);
  });
});
