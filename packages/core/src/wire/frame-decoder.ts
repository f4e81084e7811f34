import { AgentError } from '../errors.js';
import { DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_BYTES } from './codec.js';
import { readU32 } from '../util/bytes.js';

/**
 * Splits a byte stream into frame payloads. Checks each length against the limit before buffering anything, so
 * a hostile length costs nothing; whole frames inside one chunk are returned as views without copying.
 */
export class FrameDecoder {
  /** Only for a length header split across chunks (rare): most frames' headers are read in place. */
  private header: Buffer | undefined;
  private headerFilled = 0;
  private payload: Buffer | undefined;
  private payloadFilled = 0;

  constructor(private readonly maxFrameSize = DEFAULT_MAX_FRAME_SIZE) {}

  /** Bytes held for an incomplete frame (bounded by maxFrameSize + header). */
  get bufferedBytes(): number {
    return this.headerFilled + this.payloadFilled;
  }

  /** True when no partial frame is pending: the stream may end here. */
  get idle(): boolean {
    return this.headerFilled === 0 && this.payload === undefined;
  }

  /** Feeds bytes; returns the complete payloads they finish, in order. Throws FRAME_TOO_LARGE. */
  push(chunk: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.payload === undefined) {
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
          this.startPayload(length);
          offset = start;
        } else {
          const take = Math.min(FRAME_HEADER_BYTES - this.headerFilled, chunk.length - offset);
          this.header ??= Buffer.alloc(FRAME_HEADER_BYTES);
          this.header.set(chunk.subarray(offset, offset + take), this.headerFilled);
          this.headerFilled += take;
          offset += take;
          if (this.headerFilled < FRAME_HEADER_BYTES) break;
          const length = this.header.readUInt32BE(0);
          this.checkLength(length);
          this.startPayload(length);
        }
      }
      const payload = this.payload;
      if (payload === undefined) continue;
      const take = Math.min(payload.length - this.payloadFilled, chunk.length - offset);
      payload.set(chunk.subarray(offset, offset + take), this.payloadFilled);
      this.payloadFilled += take;
      offset += take;
      if (this.payloadFilled === payload.length) {
        frames.push(payload);
        this.payload = undefined;
        this.payloadFilled = 0;
        this.headerFilled = 0;
      }
    }
    return frames;
  }

  private checkLength(length: number): void {
    if (length > this.maxFrameSize) {
      throw new AgentError('FRAME_TOO_LARGE', `incoming frame of ${length} bytes exceeds the ${this.maxFrameSize}-byte limit`);
    }
  }

  private startPayload(length: number): void {
    this.payload = Buffer.allocUnsafe(length);
    this.payloadFilled = 0;
    this.headerFilled = FRAME_HEADER_BYTES;
  }
}
