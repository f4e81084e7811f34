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
