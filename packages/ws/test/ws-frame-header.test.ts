import { describe, expect, it } from 'vitest';
import * as wsModule from 'ws';
import { webSocketHeaderBytes, writeWebSocketHeader } from '../src/ws-frame-header.js';

/** ws's frame writer (exported by ws, not declared by @types/ws): the header it writes is the reference. */
interface FrameWriter {
  frame(data: Buffer, options: { fin: boolean; opcode: number; mask: boolean; readOnly: boolean; generateMask?: (mask: Buffer) => void; rsv1: boolean }): Buffer[];
}
const Sender = (wsModule as unknown as { Sender: FrameWriter }).Sender;
const zeroKey = (mask: Buffer): void => void mask.fill(0);

describe('WebSocket headers written by hand', () => {
  it("match ws's own header for a final binary message, at every length boundary, from a client (zero key) and a server", () => {
    for (const length of [0, 1, 125, 126, 127, 1029, 65_535, 65_536, 70_000]) {
      for (const masked of [false, true]) {
        const data = Buffer.alloc(length, 0x33);
        const reference = Sender.frame(data, { fin: true, opcode: 2, mask: masked, readOnly: false, generateMask: zeroKey, rsv1: false })[0]!;
        const headerBytes = webSocketHeaderBytes(length, masked);
        expect(headerBytes).toBe(reference.length);
        const frame = Buffer.alloc(headerBytes + length, 0xff);
        writeWebSocketHeader(frame, headerBytes, length, masked);
        expect([...frame.subarray(0, headerBytes)]).toEqual([...reference.subarray(0, headerBytes)]);
        expect(frame.subarray(headerBytes).every((byte) => byte === 0xff)).toBe(true); // nothing written past the header
      }
    }
  });
});
