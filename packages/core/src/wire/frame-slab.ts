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
 * to the pipe in the same turn.
 */

/** Bytes reserved in front of each frame: the mux's header. */
export const FRAME_HEADROOM = 5;
/** Frames up to this size are cut from a shared slab; larger ones get a buffer of their own. */
const SLAB_FRAME = 4 * 1024;
const SLAB_BYTES = 32 * 1024;
let slab = Buffer.allocUnsafeSlow(0);
let slabUsed = 0;
/** The frame cut last, while its headroom is unclaimed. */
let lastFrame: Uint8Array | undefined;

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
  return frame;
}

/**
 * `chunk` with `bytes` (≤ FRAME_HEADROOM) of room in front of it, for the caller to write a header into: when
 * `chunk` is the whole of the frame `allocFrame` returned last, its headroom, once (a second claim, or one for
 * any other bytes, gets undefined and the caller copies). Nothing else ever writes to that room.
 */
export function claimHeadroom(chunk: Uint8Array, bytes: number): Buffer | undefined {
  if (chunk !== lastFrame || bytes > FRAME_HEADROOM) return undefined;
  lastFrame = undefined;
  return Buffer.from(chunk.buffer, chunk.byteOffset - bytes, chunk.length + bytes);
}
