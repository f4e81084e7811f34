import { AgentError } from '../errors.js';
import { DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_BYTES } from './codec.js';
import { readU32 } from '../util/bytes.js';
import { PartialFrame } from './partial-frame.js';

/**
 * Splits a byte stream into frame payloads. Checks each length against the limit from the header alone, and
 * never allocates a declared length up front: an incomplete frame holds only the bytes that arrived (see
 * PartialFrame), so a peer that declares 16 MiB and sends one byte costs one byte, not 16 MiB. Whole frames inside
 * one chunk are returned as views without copying; a frame that spans chunks is joined once, when it completes.
 *
 * Chunks passed to `push` are kept (as views) until their frames are decoded: callers must not reuse them.
 */
export class FrameDecoder {
  /** Only for a length header split across chunks (rare): most frames' headers are read in place. */
  private header: Buffer | undefined;
  private headerFilled = 0;
  private partial: PartialFrame | undefined;

  constructor(private readonly maxFrameSize = DEFAULT_MAX_FRAME_SIZE) {}

  /** Bytes held for an incomplete frame: its header and the payload bytes received so far. */
  get bufferedBytes(): number {
    return this.headerFilled + (this.partial?.received ?? 0);
  }

  /** Memory held for an incomplete frame (see PartialFrame.footprint): what the inbound budget is charged. */
  get footprint(): number {
    return this.headerFilled + (this.partial?.footprint ?? 0);
  }

  /** True when no partial frame is pending: the stream may end here. */
  get idle(): boolean {
    return this.headerFilled === 0 && this.partial === undefined;
  }

  /** Feeds bytes; returns the complete payloads they finish, in order. Throws FRAME_TOO_LARGE. */
  push(chunk: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      const partial = this.partial;
      if (partial !== undefined) {
        const take = Math.min(partial.missing, chunk.length - offset);
        const piece = chunk.subarray(offset, offset + take);
        offset += take;
        if (take === partial.missing) {
          frames.push(partial.complete(piece));
          this.partial = undefined;
          this.headerFilled = 0;
        } else {
          partial.add(piece);
        }
        continue;
      }
      if (this.headerFilled === 0 && chunk.length - offset >= FRAME_HEADER_BYTES) {
        // Fast path: the header and maybe the whole frame are in this chunk.
        const length = readU32(chunk, offset);
        this.checkLength(length);
        const start = offset + FRAME_HEADER_BYTES;
        if (chunk.length - start >= length) {
          frames.push(chunk.subarray(start, start + length));
          offset = start + length;
          continue;
        }
        this.headerFilled = FRAME_HEADER_BYTES;
        this.partial = new PartialFrame(length);
        offset = start;
        continue;
      }
      const take = Math.min(FRAME_HEADER_BYTES - this.headerFilled, chunk.length - offset);
      this.header ??= Buffer.alloc(FRAME_HEADER_BYTES);
      this.header.set(chunk.subarray(offset, offset + take), this.headerFilled);
      this.headerFilled += take;
      offset += take;
      if (this.headerFilled < FRAME_HEADER_BYTES) break;
      const length = this.header.readUInt32BE(0);
      this.checkLength(length);
      if (length === 0) {
        frames.push(Buffer.alloc(0));
        this.headerFilled = 0;
      } else {
        this.partial = new PartialFrame(length);
      }
    }
    return frames;
  }

  private checkLength(length: number): void {
    if (length > this.maxFrameSize) {
      throw new AgentError('FRAME_TOO_LARGE', `incoming frame of ${length} bytes exceeds the ${this.maxFrameSize}-byte limit`);
    }
  }
}
