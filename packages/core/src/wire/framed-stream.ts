import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import type { BudgetHolder, ByteBudget } from '../agent/byte-budget.js';
import { decodePayload, encodeFrame, encodeFrameSegments, encodeSmallItem, FRAME_HEADER_BYTES } from './codec.js';
import { FrameDecoder } from './frame-decoder.js';
import type { WireMessage } from './messages.js';

/**
 * Bytes of item frames gathered into one write (see `sendItem`): a burst of tokens crosses the transport in
 * pieces of about this size instead of one write (one mux frame, one WebSocket message, one engine call) per token.
 */
export const ITEM_BATCH_BYTES = 16 * 1024;
/** Room for the frame that takes a batch past ITEM_BATCH_BYTES; larger frames are written on their own. */
const BATCH_CAPACITY = ITEM_BATCH_BYTES + 4 * 1024;
/** A batch's first buffer; it grows as items come. */
const FIRST_BATCH_BYTES = 1024;
/** The most bytes `encodeSmallItem` writes: a frame header, 4 bytes of msgpack headers, 255 UTF-16 units as UTF-8. */
const SMALL_ITEM_ROOM = 8 + 3 * 255;

const RESOLVED = Promise.resolve();
const NONE: Uint8Array[] = [];

/** Whole agentlink messages over a channel's byte stream: the one place framing meets a transport. */
export class FramedStream implements BudgetHolder {
  private readonly decoder: FrameDecoder;
  /**
   * Frames decoded and not yet returned: `ready` from `readyAt` on. Read by index, not `shift()`: a 16 KiB chunk of
   * tokens holds ~700 frames, and shifting them one by one showed in profiles.
   */
  private ready: Uint8Array[] = NONE;
  private readyAt = 0;
  /** Payload bytes of the message `receive` returned last (what it cost the peer's window, less the header). */
  lastFrameBytes = 0;
  /** Bytes of sends the transport has not taken yet (they wait for the peer's credit). */
  private unsent = 0;
  /** Items this side sent outside a batch, counted up to 2 (see `sendItem`). */
  private loneItems = 0;
  /** Item frames encoded but not written yet: `batched` bytes of `batch`. */
  private batch: Buffer | undefined;
  private batched = 0;
  private flushScheduled = false;
  /** A batch's write the transport has not taken yet; a failed one is kept in `writeFailure`. */
  private batchWrite: Promise<void> | undefined;
  private writeFailure: unknown;

  constructor(
    readonly stream: ChannelStream,
    private readonly maxFrameSize: number,
    /** Charged with the memory an unfinished frame holds here, beyond what the transport's window holds. */
    private readonly budget?: ByteBudget,
    /** Charged with what `send` wrote until the transport took it: replies a peer leaves unread stay charged. */
    private readonly sendBudget?: ByteBudget,
  ) {
    this.decoder = new FrameDecoder(maxFrameSize);
  }

  /** Encodes and writes one message; resolves when the transport accepted it (backpressure). */
  send(message: WireMessage): Promise<void> {
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    if (this.batched > 0 || this.batchWrite) return this.flushAll().then(() => this.writeSegments(segments));
    return this.writeSegments(segments);
  }

  /**
   * Sends an item. A stream's first two items are written on their own, so the first leaves at once (the
   * transports let a stream's first bytes go when it writes the second: architecture.md, "A stream's first
   * token"); later ones are encoded into a batch, written at the end of the turn (process.nextTick: after the
   * microtasks a producer that never waits runs in) or once it holds ITEM_BATCH_BYTES. Returns a promise only
   * when the producer must wait — a batch's write the transport has not taken (backpressure, as `send`'s) — and
   * undefined when it may go on at once. A failed write is reported by the next call. Throws as `send` does on
   * an item it cannot encode.
   */
  sendItem(body: unknown): Promise<void> | undefined {
    if (this.writeFailure !== undefined) return Promise.reject(this.writeFailure);
    if (this.loneItems < 2 && this.batched === 0 && !this.batchWrite) {
      this.loneItems++;
      return this.send({ type: 'item', body });
    }
    let end = encodeSmallItem(body, this.room(SMALL_ITEM_ROOM), this.batched);
    if (end < 0) {
      const segments = encodeFrameSegments({ type: 'item', body }, this.maxFrameSize);
      if (segments.length > 1 || segments[0]!.length > BATCH_CAPACITY - this.batched) {
        // A large item goes on its own, after what is batched.
        return this.flushAll().then(() => this.writeSegments(segments));
      }
      this.room(segments[0]!.length).set(segments[0]!, this.batched);
      end = this.batched + segments[0]!.length;
    } else if (end - this.batched - FRAME_HEADER_BYTES > this.maxFrameSize) {
      encodeFrame({ type: 'item', body }, this.maxFrameSize); // throws FRAME_TOO_LARGE, as `send` would
    }
    this.batched = end;
    if (end >= ITEM_BATCH_BYTES) return this.flushBatch() ?? this.batchWrite;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      process.nextTick(flushAtEndOfTurn, this);
    }
    return this.batchWrite;
  }

  /**
   * The batch's buffer with room for `bytes` more. It starts small and doubles (to BATCH_CAPACITY at most), so a
   * stream whose write waits for credit holds about what it batched, not a whole batch's capacity.
   */
  private room(bytes: number): Buffer {
    const batch = this.batch;
    const needed = this.batched + bytes;
    if (batch && batch.length >= needed) return batch;
    const grown = Buffer.allocUnsafe(Math.min(BATCH_CAPACITY, Math.max(needed, 2 * (batch?.length ?? FIRST_BATCH_BYTES / 2))));
    if (batch) batch.copy(grown, 0, 0, this.batched);
    return (this.batch = grown);
  }

  /** The end of the turn in which items were batched: they go now (a failure is reported by the next send). */
  endOfTurn(): void {
    this.flushScheduled = false;
    this.flushBatch();
  }

  /** Writes the batch unless a write is still waiting (it writes the batch when it settles); returns the write. */
  private flushBatch(): Promise<void> | undefined {
    if (this.batchWrite || this.batched === 0 || this.writeFailure !== undefined) return undefined;
    const chunk = this.batch!.subarray(0, this.batched);
    this.batch = undefined; // the transport may hold the chunk until it is sent: the next batch gets a new buffer
    this.batched = 0;
    const written = this.charged(this.stream.write(chunk), chunk.length);
    this.batchWrite = written;
    written.then(
      () => {
        this.batchWrite = undefined;
        this.flushBatch();
      },
      (error: unknown) => {
        this.batchWrite = undefined;
        this.writeFailure ??= error;
      },
    );
    return written;
  }

  /** Resolves once every batched item was written (the transport took them): what a later message waits for. */
  private flushAll(): Promise<void> {
    if (this.writeFailure !== undefined) return Promise.reject(this.writeFailure);
    const pending = this.batchWrite ?? this.flushBatch();
    return pending ? pending.then(() => this.flushAll()) : RESOLVED;
  }

  private writeSegments(segments: Uint8Array[]): Promise<void> {
    // In order: a second write must not overtake a first one still waiting for credit.
    const written = segments.length === 1 ? this.stream.write(segments[0]!) : this.stream.write(segments[0]!).then(() => this.stream.write(segments[1]!));
    return this.charged(written, byteLength(segments));
  }

  /**
   * Sends the stream's last message and ends our side: one step where the transport can fold the end into the
   * write (ChannelStream.endWith: on the mux, one frame instead of two), else a write and then an end. Batched
   * items go first.
   */
  sendLast(message: WireMessage): Promise<void> {
    const { stream } = this;
    if (!stream.endWith) return this.send(message).then(() => stream.end());
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    if (this.batched > 0 || this.batchWrite) return this.flushAll().then(() => this.writeLast(segments));
    return this.writeLast(segments);
  }

  private writeLast(segments: Uint8Array[]): Promise<void> {
    const stream = this.stream as ChannelStream & Required<Pick<ChannelStream, 'endWith'>>;
    const written = segments.length === 1 ? stream.endWith(segments[0]!) : stream.write(segments[0]!).then(() => stream.endWith(segments[1]!));
    return this.charged(written, byteLength(segments));
  }

  /** Charges the send budget with `bytes` until `written` settles (the transport took them). */
  private charged(written: Promise<void>, bytes: number): Promise<void> {
    const sendBudget = this.sendBudget;
    if (!sendBudget) return written;
    this.unsent += bytes;
    sendBudget.set(this, this.unsent);
    const settle = (): void => {
      this.unsent -= bytes;
      sendBudget.set(this, this.unsent);
    };
    return written.then(settle, (error: unknown) => {
      settle();
      throw error;
    });
  }

  /**
   * The next message if one is already decoded (a chunk held several frames), without touching the stream;
   * undefined when none is. Throws as `receive` does on a frame that breaks the rules.
   */
  takeReady(): WireMessage | undefined {
    const payload = this.nextReady();
    if (!payload) return undefined;
    this.lastFrameBytes = payload.length;
    return decodePayload(payload);
  }

  /** True when nothing beyond the messages already returned has been read: the stream may change hands. */
  get drained(): boolean {
    return this.readyAt >= this.ready.length && this.decoder.idle;
  }

  /**
   * The next message if it already arrived whole (ChannelStream.readNow), without waiting; undefined when it did
   * not (then `receive` waits for it, or for the end). Throws as `receive` does on a frame that breaks the rules.
   */
  receiveNow(): WireMessage | undefined {
    const { stream } = this;
    for (;;) {
      const payload = this.nextReady();
      if (payload) {
        this.lastFrameBytes = payload.length;
        return decodePayload(payload);
      }
      const chunk = stream.readNow?.();
      if (!chunk) return undefined;
      this.take(chunk);
    }
  }

  /** The next message, or undefined when the peer ended the stream cleanly between frames. */
  async receive(): Promise<WireMessage | undefined> {
    for (;;) {
      const payload = this.nextReady();
      if (payload) {
        this.lastFrameBytes = payload.length;
        return decodePayload(payload);
      }
      let chunk: Uint8Array | undefined;
      try {
        chunk = await this.stream.read();
      } catch (error) {
        this.budget?.set(this, 0); // the stream is gone, and with it what the decoder held
        throw error;
      }
      if (chunk === undefined) {
        if (!this.decoder.idle) {
          this.budget?.set(this, 0);
          // A session torn down mid-frame (a killed peer, on HTTP/2) ends streams this way: that is a lost
          // connection, retryable, not bytes that broke the protocol.
          throw new AgentError('UNAVAILABLE', 'stream ended inside a frame: the connection was lost');
        }
        return undefined;
      }
      this.take(chunk);
    }
  }

  /** The next decoded frame's payload, if any; the list is let go once read to its end (its chunk with it). */
  private nextReady(): Uint8Array | undefined {
    const { ready } = this;
    if (this.readyAt >= ready.length) return undefined;
    const payload = ready[this.readyAt++];
    if (this.readyAt === ready.length) {
      this.ready = NONE;
      this.readyAt = 0;
    }
    return payload;
  }

  /** Feeds a chunk to the decoder: its whole frames become ready, the rest is charged to the budget. */
  private take(chunk: Uint8Array): void {
    let frames: Uint8Array[];
    try {
      frames = this.decoder.push(chunk);
    } catch (error) {
      this.budget?.set(this, 0); // FRAME_TOO_LARGE: the caller resets the stream
      throw error;
    }
    if (this.readyAt >= this.ready.length) {
      this.ready = frames;
      this.readyAt = 0;
    } else {
      for (const frame of frames) this.ready.push(frame);
    }
    this.budget?.set(this, this.decoder.footprint);
  }

  evict(reason: AgentError): void {
    this.stream.reset(reason);
  }
}

function flushAtEndOfTurn(framed: FramedStream): void {
  framed.endOfTurn();
}

function byteLength(segments: Uint8Array[]): number {
  return segments.length === 1 ? segments[0]!.length : segments[0]!.length + segments[1]!.length;
}
