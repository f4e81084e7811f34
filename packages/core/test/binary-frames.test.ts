import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { codecPackr as packr, expectFastReadAgrees, generalDecode, mutatedPayloads } from './wire-paths.js';
import { decodeBinaryFrame, encodeBinaryFrame } from '../src/wire/binary-frames.js';
import { decodePayload, encodeFrame, FRAME_HEADER_BYTES, unpackPayload } from '../src/wire/codec.js';
import { MODES, PRIORITIES, messageToTuple, tupleToMessage, type WireMessage } from '../src/wire/messages.js';

/** Equal messages; bodies compared as bytes (deep equality over 64 KiB buffers is slow), and of the same class. */
function expectSame(actual: WireMessage | undefined, expected: WireMessage | undefined): void {
  const bodyOf = (m: WireMessage | undefined): unknown => (m && 'body' in m ? m.body : undefined);
  const [a, b] = [bodyOf(actual), bodyOf(expected)];
  if (a instanceof Uint8Array && b instanceof Uint8Array) {
    expect(a.constructor).toBe(b.constructor);
    expect(Buffer.compare(a, b)).toBe(0);
    expect({ ...actual, body: null }).toEqual({ ...expected, body: null });
  } else {
    expect(actual).toEqual(expected);
  }
}

const bodies = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  fc.constantFrom(0, 255, 256, 65_535, 65_536).map((n) => Buffer.alloc(n, 7)),
  fc.uint8Array({ maxLength: 40 }), // a plain Uint8Array, not a Buffer
);
const methods = fc.oneof(
  fc.string({ minLength: 1, maxLength: 40 }),
  fc.constantFrom(1, 31, 32, 255, 256).map((n) => 'm'.repeat(n)),
  fc.string({ minLength: 1, maxLength: 8, unit: 'binary' }),
);
const timeouts = fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 300 }), fc.constantFrom(127, 128, 255, 256, 65_535, 65_536, 0xffff_ffff, 2 ** 32, 2 ** 40));
const requestFields = {
  type: fc.constant('request' as const),
  method: methods,
  timeoutMs: timeouts,
  priority: fc.constantFrom(...PRIORITIES),
  metadata: fc.oneof(fc.constant({}), fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { minKeys: 1, maxKeys: 2 })),
  body: bodies,
  mode: fc.constantFrom(...MODES),
};
const requests: fc.Arbitrary<WireMessage> = fc.record(requestFields);
const replies: fc.Arbitrary<WireMessage> = fc.record({ type: fc.constantFrom('response' as const, 'item' as const), body: bodies });
const messages = fc.oneof(requests, replies);

describe('binary call frames (written and read without msgpackr)', () => {
  it('write the bytes msgpackr writes, and read back what the general path reads', () => {
    fc.assert(
      fc.property(messages, (message) => {
        const fast = encodeBinaryFrame(message);
        const reference = packr.pack(messageToTuple(message));
        if (fast !== undefined) expect(Buffer.compare(fast.subarray(FRAME_HEADER_BYTES), reference)).toBe(0);
        const payload = encodeFrame(message).subarray(FRAME_HEADER_BYTES);
        const general = generalDecode(payload);
        expect(general).toBeDefined();
        expectSame(decodePayload(payload), general);
        const direct = decodeBinaryFrame(payload);
        if (direct !== undefined) expectSame(direct, general);
      }),
      { numRuns: 500 },
    );
  });

  it('take the common call: binary body, no metadata, short ASCII method, a deadline up to u32', () => {
    const body = Buffer.alloc(1024, 1);
    const request: WireMessage = { type: 'request', method: 'echo', timeoutMs: 120_000, priority: 'normal', metadata: {}, body, mode: 'unary' };
    const frame = encodeBinaryFrame(request)!;
    expect(frame.readUInt32BE(0)).toBe(frame.length - FRAME_HEADER_BYTES);
    expect(decodeBinaryFrame(frame.subarray(FRAME_HEADER_BYTES))).toEqual(request);
    expect(decodeBinaryFrame(encodeBinaryFrame({ type: 'response', body })!.subarray(FRAME_HEADER_BYTES))).toEqual({ type: 'response', body });
    // Left to msgpackr: metadata, non-ASCII or long methods, deadlines past u32 (bodies: see plain-bodies.test.ts).
    expect(encodeBinaryFrame({ ...request, metadata: { a: 'b' } })).toBeUndefined();
    expect(encodeBinaryFrame({ ...request, method: 'é' })).toBeUndefined();
    expect(encodeBinaryFrame({ ...request, method: 'm'.repeat(256) })).toBeUndefined();
    expect(encodeBinaryFrame({ ...request, timeoutMs: 2 ** 32 })).toBeUndefined();
    expect(encodeBinaryFrame({ type: 'response', body: { a: 1 } })).toBeUndefined();
  });

  it('name the method by the bytes of each frame, even when the buffer of an earlier frame is written over', () => {
    const request = (method: string): WireMessage => ({ type: 'request', method, timeoutMs: 1000, priority: 'normal', metadata: {}, body: Buffer.alloc(4), mode: 'unary' });
    const alpha = Buffer.from(encodeBinaryFrame(request('alpha'))!.subarray(FRAME_HEADER_BYTES));
    const omega = Buffer.from(encodeBinaryFrame(request('omega'))!.subarray(FRAME_HEADER_BYTES));
    expect(decodeBinaryFrame(alpha)).toMatchObject({ method: 'alpha' });
    alpha.set(omega); // the memory of the frame read first now holds another frame (a reused read buffer)
    expect(decodeBinaryFrame(omega)).toMatchObject({ method: 'omega' });
    expect(decodeBinaryFrame(alpha)).toMatchObject({ method: 'omega' });
  });

  it('never accept what the general path refuses, nor read it differently: cut, extended and mutated frames', () => {
    const small = fc.oneof(
      fc.record({ ...requestFields, body: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)) }),
      fc.record({ type: fc.constantFrom('response' as const, 'item' as const), body: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)) }),
    );
    const encoded = small.map((message) => Buffer.from(encodeFrame(message).subarray(FRAME_HEADER_BYTES)));
    fc.assert(
      // (the bodies here are short: large ones are the first property's)
      fc.property(mutatedPayloads(encoded), fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ minLength: 1, maxLength: 8 }), (payload, before, after) =>
        expectFastReadAgrees(payload, before, after, expectSame),
      ),
      { numRuns: 3000 },
    );
  });
});
