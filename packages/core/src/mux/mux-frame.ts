/**
 * Frames of the stream multiplexer that runs over channels carrying one ordered message pipe (WebSocket, relay).
 * Each pipe message is exactly one mux frame: [type u8][stream id u32 BE][body]. See docs/protocol.md.
 */
import { claimHeadroom } from '../wire/frame-slab.js';

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
 * Flags in the high bits of the type byte, on OPEN and DATA only, sent only to a peer that announced
 * {@link MuxFeature.frameFlags} (a peer without the feature closes the channel on the unknown type byte).
 * `fin`: the sender's side ends after this frame's body (a FIN folded into the frame). `endsWithPeer` (OPEN
 * only): the opener will send nothing on this stream but an abort (a cancel message, a RESET), so its side ends
 * when the receiver ends its own: no FIN of the opener's crosses the pipe.
 */
export const MuxFrameFlag = { fin: 0x80, endsWithPeer: 0x40 } as const;

/**
 * Features a side announces in the stream-id field of its SETTINGS frame (always its first frame). Peers from
 * before features read SETTINGS' window and ignore that field, and announce 0.
 * `largestBody`: bits 8–15 hold n, and the side takes OPEN and DATA bodies up to (n + 1) × 64 KiB; 0 (every peer
 * before it) is the protocol's 64 KiB.
 */
export const MuxFeature = { frameFlags: 1 } as const;
export const MUX_FEATURES = MuxFeature.frameFlags;
const LARGEST_BODY_SHIFT = 8;
const LARGEST_BODY_UNITS = 0xff;

/**
 * The largest OPEN or DATA body every peer takes (docs/protocol.md); a larger one only to a peer that announced it.
 */
export const MAX_MUX_BODY = 64 * 1024;
/** The largest body a side can announce it takes: 256 × 64 KiB. */
export const MAX_ANNOUNCED_MUX_BODY = (LARGEST_BODY_UNITS + 1) * MAX_MUX_BODY;

/** SETTINGS' feature field for a side that takes bodies up to `largestBody` bytes (rounded down to 64 KiB units). */
export function featuresTaking(largestBody: number): number {
  const units = Math.min(LARGEST_BODY_UNITS + 1, Math.floor(largestBody / MAX_MUX_BODY));
  return MUX_FEATURES | (Math.max(0, units - 1) << LARGEST_BODY_SHIFT);
}

/** The largest body a peer takes, from its SETTINGS' feature field. */
export function largestBodyOf(features: number): number {
  return (((features >>> LARGEST_BODY_SHIFT) & LARGEST_BODY_UNITS) + 1) * MAX_MUX_BODY;
}

export const MUX_FLAG_BITS = MuxFrameFlag.fin | MuxFrameFlag.endsWithPeer;

/** Whether `flags` may sit on a frame of `type`: both on OPEN, `fin` on DATA, none elsewhere. */
export function flagsAllowed(type: number, flags: number): boolean {
  return flags === 0 || type === MuxFrameType.open || (type === MuxFrameType.data && flags === MuxFrameFlag.fin);
}

/**
 * Send credit every stream starts with, before the peer's SETTINGS say otherwise. A side's receive window is at
 * least this (so credit granted before its SETTINGS arrive never overruns it); a larger one is announced.
 */
export const INITIAL_WINDOW = 256 * 1024;

export type MuxFrameTypeNumber = (typeof MuxFrameType)[keyof typeof MuxFrameType];
/** Bytes of a mux frame's header (type u8, stream id u32): a frame is at most this + `mux.maxChunk` (docs/protocol.md). */
export const MUX_HEADER_BYTES = 5;

export function encodeMuxFrame(type: MuxFrameTypeNumber, streamId: number, body?: Uint8Array, flags = 0): Buffer {
  // A frame fresh from the codec has room for the header in front of it: no copy of the body (wire/frame-slab.ts).
  const inPlace = body && claimHeadroom(body, MUX_HEADER_BYTES);
  if (inPlace) {
    inPlace[0] = type | flags;
    inPlace.writeUInt32BE(streamId, 1);
    return inPlace;
  }
  const frame = Buffer.allocUnsafe(MUX_HEADER_BYTES + (body?.length ?? 0));
  frame[0] = type | flags;
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
