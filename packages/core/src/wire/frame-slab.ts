/**
 * Where the codec's binary frames (binary-frames.ts) are cut from, with room for a header in front of each.
 *
 * A new ArrayBuffer per frame cost about as much as writing the frame; small frames are cut from a slab of this
 * module's own instead, as msgpackr cut them from its buffer: never node's shared pool (whose slab other code's
 * short-lived buffers share, so a frame a stalled peer leaves unsent would pin them all), and a frame is never
 * written to once returned.
 *
 * Every frame has FRAME_HEADROOM bytes of its own in front of it, so that the mux (which prefixes each message
 * with its 5-byte header) can send the frame it was given without copying it into a new buffer: it claims the
 * headroom of the frame cut last ({@link claimHeadroom}) — a unary call's request or response goes from the codec
 * to the pipe in the same turn. What the mux leaves of the room the pipe may claim in turn, in front of the mux
 * frame, for its own framing (a WebSocket frame's header: then the pipe writes header and message as one buffer).
 */

/** Bytes the mux claims in front of a frame: its header (MUX_HEADER_BYTES, which depends on this module). */
const MUX_ROOM = 5;
/** Bytes a pipe may claim in front of a mux frame: the longest WebSocket frame header (2 + 8 length + 4 mask). */
export const PIPE_HEADROOM = 14;
/** Bytes reserved in front of each frame: the mux's header, and the pipe's in front of that. */
export const FRAME_HEADROOM = MUX_ROOM + PIPE_HEADROOM;
/** Frames up to this size are cut from a shared slab; larger ones get a buffer of their own. */
const SLAB_FRAME = 4 * 1024;
const SLAB_BYTES = 32 * 1024;
let slab = Buffer.allocUnsafeSlow(0);
let slabUsed = 0;
/** The frame cut last (or that frame with a header claimed in front), while room in front of it is unclaimed. */
let lastFrame: Uint8Array | undefined;
/** Bytes of room still unclaimed in front of `lastFrame`. */
let lastRoom = 0;

/** A buffer for one frame, with FRAME_HEADROOM bytes of its own in front of it. */
export function allocFrame(size: number): Buffer {
  let frame: Buffer;
  if (size > SLAB_FRAME) {
    frame = Buffer.allocUnsafeSlow(FRAME_HEADROOM + size).subarray(FRAME_HEADROOM);
  } else {
    if (slabUsed + FRAME_HEADROOM + size > slab.length) {
      slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
      slabUsed = 0;
    }
    frame = slab.subarray(slabUsed + FRAME_HEADROOM, slabUsed + FRAME_HEADROOM + size);
    slabUsed += (FRAME_HEADROOM + size + 7) & ~7; // 8-byte aligned, as node's pool does
  }
  lastFrame = frame;
  lastRoom = FRAME_HEADROOM;
  return frame;
}

/**
 * `chunk` with `bytes` of room in front of it, for the caller to write a header into: when `chunk` is the whole of
 * the frame `allocFrame` returned last, or exactly what the last claim on it returned, and that much room is left
 * in front of it (FRAME_HEADROOM in all). Anything else gets undefined, and the caller copies. A claim takes the
 * room just in front of `chunk`, so each layer claims once and the next one's claim lies in front of it (the mux's
 * header, then the pipe's); nothing else ever writes to that room.
 */
export function claimHeadroom(chunk: Uint8Array, bytes: number): Buffer | undefined {
  if (chunk !== lastFrame || bytes > lastRoom) return undefined;
  const claimed = Buffer.from(chunk.buffer, chunk.byteOffset - bytes, chunk.length + bytes);
  lastFrame = claimed;
  lastRoom -= bytes;
  return claimed;
}
