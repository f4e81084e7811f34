import { expect } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { decodeBinaryFrame } from '../src/wire/binary-frames.js';
import { decodePayload, unpackPayload } from '../src/wire/codec.js';
import { tupleToMessage, type WireMessage } from '../src/wire/messages.js';

/** The codec's own msgpackr settings: what a peer without the fast paths writes and reads. */
export const codecPackr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number', mapsAsObjects: true, encodeUndefinedAsNil: true });

/** The general path: msgpackr after the shape check, then the hand-written validator; undefined where it refuses. */
export function generalDecode(payload: Buffer): WireMessage | undefined {
  try {
    return tupleToMessage(unpackPayload(payload));
  } catch {
    return undefined;
  }
}

/** Each payload cut short, extended by a byte, or with one byte changed: what a peer could send instead. */
export function mutatedPayloads(payloads: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  return fc
    .tuple(payloads, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('flip', 'cut', 'append'))
    .map(([payload, where, byte, how]) => {
      const at = where % payload.length;
      if (how === 'cut') return payload.subarray(0, at);
      if (how === 'append') return Buffer.concat([payload, Buffer.from([byte])]);
      const copy = Buffer.from(payload);
      copy[at] = byte;
      return copy;
    });
}

/**
 * The fast read takes only what the general path takes, and reads it alike, alone or in place between other bytes
 * (a receiver's chunk); what the general path refuses, decodePayload refuses with PROTOCOL_ERROR.
 */
export function expectFastReadAgrees(payload: Buffer, before: Uint8Array, after: Uint8Array, expectSame: (actual: WireMessage | undefined, expected: WireMessage | undefined) => void): void {
  const direct = decodeBinaryFrame(payload);
  const general = generalDecode(payload);
  if (direct !== undefined) expectSame(direct, general);
  const inPlace = decodeBinaryFrame(Buffer.concat([before, payload, after]), before.length, before.length + payload.length);
  if (direct === undefined) expect(inPlace).toBeUndefined();
  else expectSame(inPlace, direct);
  if (general === undefined) expect(() => decodePayload(payload)).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
  else expectSame(decodePayload(payload), general);
}
