/**
 * Frames of the stream multiplexer that runs over channels carrying one ordered message pipe (WebSocket, relay).
 * Each pipe message is exactly one mux frame: [type u8][stream id u32 BE][body]. See docs/protocol.md.
 */
export const MuxFrameType = {
  open: 0,
  data: 1,
  window: 2,
  fin: 3,
  reset: 4,
  goaway: 5,
  settings: 6,
} as const;

/**
 * Send credit every stream starts with, before the peer's SETTINGS say otherwise. A side's receive window is at
 * least this (so credit granted before its SETTINGS arrive never overruns it); a larger one is announced.
 */
export const INITIAL_WINDOW = 256 * 1024;

export type MuxFrameTypeNumber = (typeof MuxFrameType)[keyof typeof MuxFrameType];
export const MUX_HEADER_BYTES = 5;

export function encodeMuxFrame(type: MuxFrameTypeNumber, streamId: number, body?: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(MUX_HEADER_BYTES + (body?.length ?? 0));
  frame[0] = type;
  frame.writeUInt32BE(streamId, 1);
  if (body) frame.set(body, MUX_HEADER_BYTES);
  return frame;
}

export function encodeU32Frame(type: MuxFrameTypeNumber, streamId: number, value: number): Buffer {
  const frame = Buffer.allocUnsafe(MUX_HEADER_BYTES + 4);
  frame[0] = type;
  frame.writeUInt32BE(streamId, 1);
  frame.writeUInt32BE(value, MUX_HEADER_BYTES);
  return frame;
}

export function encodeGoaway(code: number, message: string): Buffer {
  const text = Buffer.from(message.slice(0, 512), 'utf8');
  const frame = Buffer.allocUnsafe(MUX_HEADER_BYTES + 4 + text.length);
  frame[0] = MuxFrameType.goaway;
  frame.writeUInt32BE(0, 1);
  frame.writeUInt32BE(code, MUX_HEADER_BYTES);
  text.copy(frame, MUX_HEADER_BYTES + 4);
  return frame;
}
