import { AgentError } from '../errors.js';
import { DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_BYTES } from './codec.js';
import { BufferViews, readU32 } from '../util/bytes.js';
import { PartialFrame } from './partial-frame.js';

const EMPTY = new Uint8Array(0);

/**
 * Splits a byte stream into frame payloads. Checks each length against the limit from the header alone, and
 * never allocates a declared length up front: an incomplete frame holds only the bytes that arrived (see
 * PartialFrame), so a peer that declares 16 MiB and sends one byte costs one byte, not 16 MiB. Whole frames inside
 * one chunk are read where they lie, without copying; a frame that spans chunks is joined once, when it completes.
 *
 * Two ways to read: `push` returns a chunk's payloads as views; `feed` then `next` reads them one at a time in
 * place (`frameBytes` from `frameStart` to `frameEnd`), with no view or list per frame — a 16 KiB chunk of tokens
 * holds ~700 frames, and a view each was a tenth of a stream's per-item cost in profiles. A reader that may wait
 * after a frame (for the next chunk) calls `release` once it read it, so the decoder pins nothing it returned.
 *
 * Chunks passed in are kept (as views) until their frames are read: callers must not reuse them.
 */
export class FrameDecoder {
  /** Only for a length header split across chunks (rare): most frames' headers are read in place. */
  private header: Buffer | undefined;
  private headerFilled = 0;
  private partial: PartialFrame | undefined;
  /** The chunk `next` reads from `offset` on (`feed`); EMPTY once read to its end. */
  private chunk: Uint8Array = EMPTY;
  private offset = 0;
  /**
   * The bytes holding the payload of the frame `next` found last: the chunk fed, or a frame joined from chunks
   * (empty once `release`d, or once `next` found no frame).
   */
  frameBytes: Uint8Array = EMPTY;
  /** Where that payload starts in `frameBytes`. */
  frameStart = 0;
  /** Where that payload ends in `frameBytes` (exclusive). */
  frameEnd = 0;
  /**
   * Views of `frameBytes` when it is the chunk fed and a Buffer (undefined otherwise): made once per chunk, for the
   * bodies of its frames (BufferViews). Let go with the frame. Core's own readers use it.
   * @internal
   */
  frameViews: BufferViews | undefined;
  /** The chunk's views, once a frame of it asked for them. */
  private chunkViews: BufferViews | undefined;

  constructor(private readonly maxFrameSize = DEFAULT_MAX_FRAME_SIZE) {}

  /** Bytes held for an incomplete frame: its header and the payload bytes received so far. */
  get bufferedBytes(): number {
    return this.headerFilled + (this.partial?.received ?? 0);
  }

  /** Memory held for an incomplete frame (see PartialFrame.footprint): what the inbound budget is charged. */
  get footprint(): number {
    return this.headerFilled + (this.partial?.footprint ?? 0);
  }

  /** True when no partial frame is pending and every byte fed was read: the stream may end here. */
  get idle(): boolean {
    return this.headerFilled === 0 && this.partial === undefined && this.offset >= this.chunk.length;
  }

  /** True while bytes fed are not read yet (`next` may find frames in them). */
  get unread(): boolean {
    return this.offset < this.chunk.length;
  }

  /** Feeds bytes; returns the complete payloads they finish, in order (views). Throws FRAME_TOO_LARGE. */
  push(chunk: Uint8Array): Uint8Array[] {
    this.feed(chunk);
    const frames: Uint8Array[] = [];
    while (this.next()) frames.push(this.frameStart === 0 && this.frameEnd === this.frameBytes.length ? this.frameBytes : this.frameBytes.subarray(this.frameStart, this.frameEnd));
    return frames;
  }

  /** Gives the decoder a chunk for `next` to read; the one before must have been read to its end. */
  feed(chunk: Uint8Array): void {
    if (this.offset < this.chunk.length) throw new Error('FrameDecoder.feed: the previous chunk is not read to its end');
    this.chunk = chunk;
    this.offset = 0;
    this.chunkViews = undefined;
  }

  /**
   * Finds the next whole frame in what was fed: true and `frameBytes`/`frameStart`/`frameEnd` set, or false when
   * the bytes fed are read to their end (a frame they begin but do not finish is held for the next chunk). Throws
   * FRAME_TOO_LARGE when it reaches a header declaring more than the limit.
   */
  next(): boolean {
    const chunk = this.chunk;
    let offset = this.offset;
    while (offset < chunk.length) {
      const partial = this.partial;
      if (partial !== undefined) {
        const take = Math.min(partial.missing, chunk.length - offset);
        const piece = chunk.subarray(offset, offset + take);
        offset += take;
        if (take === partial.missing) {
          const payload = partial.complete(piece);
          this.partial = undefined;
          this.headerFilled = 0;
          return this.found(payload, 0, payload.length, offset);
        }
        partial.add(piece);
        continue;
      }
      if (this.headerFilled === 0 && chunk.length - offset >= FRAME_HEADER_BYTES) {
        // Fast path: the header and maybe the whole frame are in this chunk.
        const length = readU32(chunk, offset);
        this.checkLength(length);
        const start = offset + FRAME_HEADER_BYTES;
        if (chunk.length - start >= length) return this.found(chunk, start, start + length, start + length);
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
        this.headerFilled = 0;
        return this.found(EMPTY_FRAME, 0, 0, offset);
      }
      this.partial = new PartialFrame(length);
    }
    // Read to its end: let the chunk go (what a partial frame needs of it was kept or copied).
    this.chunk = EMPTY;
    this.offset = 0;
    this.chunkViews = undefined;
    this.frameBytes = EMPTY;
    this.frameViews = undefined;
    return false;
  }

  /**
   * Lets go of the frame `next` found last, once it is read: a reader that then waits for the next chunk must not
   * pin it (a frame joined from chunks is up to maxFrameSize, and no budget counts a frame once it is whole).
   */
  release(): void {
    this.frameBytes = EMPTY;
    this.frameViews = undefined;
  }

  /**
   * Takes the bytes fed and not read yet, and lets them go: what follows a frame that is not agentlink framing (a
   * tunnel's raw bytes right behind its accepting reply).
   */
  takeUnread(): Uint8Array {
    const rest = this.chunk.subarray(this.offset);
    this.chunk = EMPTY;
    this.offset = 0;
    this.chunkViews = undefined;
    return rest;
  }

  /** Drops what was fed and not read yet (the stream failed: nothing after the failure is wanted). */
  discard(): void {
    this.chunk = EMPTY;
    this.offset = 0;
    this.chunkViews = undefined;
    this.frameBytes = EMPTY;
    this.frameViews = undefined;
  }

  private found(bytes: Uint8Array, start: number, end: number, offset: number): true {
    this.frameBytes = bytes;
    this.frameStart = start;
    this.frameEnd = end;
    const chunk = this.chunk;
    // A chunk of one frame (a call's reply) makes no views: they pay off over a chunk's many frames.
    this.frameViews = bytes === chunk && (start > FRAME_HEADER_BYTES || end < chunk.length) ? (this.chunkViews ??= BufferViews.of(chunk)) : undefined;
    if (offset < chunk.length) {
      this.offset = offset;
    } else {
      // The chunk is read to its end: not kept for the next call (the reader may wait long before it makes one).
      this.chunk = EMPTY;
      this.offset = 0;
      this.chunkViews = undefined;
    }
    return true;
  }

  private checkLength(length: number): void {
    if (length > this.maxFrameSize) {
      // Nothing after a refused frame is read: the stream is reset.
      this.discard();
      throw new AgentError('FRAME_TOO_LARGE', `incoming frame of ${length} bytes exceeds the ${this.maxFrameSize}-byte limit`);
    }
  }
}

/** A zero-length payload (never valid as a message, but a frame): the same empty Buffer `push` always gave. */
const EMPTY_FRAME = Buffer.alloc(0);
