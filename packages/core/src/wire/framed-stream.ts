import { WRITTEN } from './written.js';
import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import type { BudgetHolder, ByteBudget } from '../agent/byte-budget.js';
import { decodePayloadAt, encodeFrame, encodeFrameSegments, encodeSmallItem, FRAME_HEADER_BYTES } from './codec.js';
import { FrameDecoder } from './frame-decoder.js';
import { DEFAULT_DECODE_LIMITS } from './msgpack-shape.js';
import { readU32 } from '../util/bytes.js';
import { allocFrame } from './frame-slab.js';
import type { WireMessage } from './messages.js';
import type { ChunkSink } from '../util/chunk-queue.js';

/** A push-style reader of whole messages (`FramedStream.listen`). */
export interface MessageReceiver {
  /** The next message, or undefined when the peer ended the stream cleanly between frames. */
  onMessage(message: WireMessage | undefined): void;
  /** What `receive` would have thrown: a reset, a lost channel, a frame that breaks the rules. Nothing follows. */
  onReadError(error: unknown): void;
}

/**
 * Bytes of item frames gathered into one write (see `sendItem`): a burst of tokens crosses the transport in
 * pieces of about this size instead of one write (one mux frame, one WebSocket message, one engine call) per token.
 */
export const ITEM_BATCH_BYTES = 16 * 1024;
/** Room for the frame that takes a batch past ITEM_BATCH_BYTES; larger frames are written on their own. */
const BATCH_CAPACITY = ITEM_BATCH_BYTES + 4 * 1024;
/** A batch's first buffer; it grows as items come. */
const FIRST_BATCH_BYTES = 1024;
/** `sendBudget` is told what this side holds unsent in steps of this many bytes, rounded up (see `charge`). */
const SEND_CHARGE_STEP = 4 * 1024;
/** The most bytes `encodeSmallItem` writes: a frame header, 4 bytes of msgpack headers, 255 UTF-16 units as UTF-8. */
const SMALL_ITEM_ROOM = 8 + 3 * 255;

/** Where a lone item is encoded before it is copied into a frame of its exact size (see `loneItem`). */
const loneScratch = Buffer.allocUnsafeSlow(SMALL_ITEM_ROOM);

/** Whole agentlink messages over a channel's byte stream: the one place framing meets a transport. */
export class FramedStream implements BudgetHolder, ChunkSink {
  private readonly decoder: FrameDecoder;
  /** What the budget was charged last for an unfinished frame (the decoder's footprint then). */
  private charged = 0;
  /** Payload bytes of the message `receive` returned last (what it cost the peer's window, less the header). */
  lastFrameBytes = 0;
  /**
   * Bytes this side encoded that the transport has not taken yet: batched items, and writes waiting for the
   * peer's credit. Charged to `sendBudget` from the moment they are encoded, so a producer that does not wait
   * cannot make the agent hold more than the budget allows.
   */
  private unsent = 0;
  /** What `sendBudget` holds for this stream: `unsent` rounded up to SEND_CHARGE_STEP (see `charge`). */
  private chargedUnsent = 0;
  /** Items this side sent outside a batch, counted up to 2 (see `sendItem`). */
  private loneItems = 0;
  /** Item frames encoded but not written yet: `batched` bytes of `batch`. */
  private batch: Buffer | undefined;
  private batched = 0;
  private flushScheduled = false;
  /**
   * The last write handed to the transport that it has not taken yet. Every write (a batch, a lone or large item,
   * any other message) starts only after the one before it settled, so nothing overtakes anything, whoever waits
   * or does not wait for the promises returned.
   */
  private tail: Promise<void> | undefined;
  /** The first write that failed: every later send fails with it, and batched items are dropped. */
  private writeFailure: unknown;
  /** The push-style reader, once `listen` made one. */
  private receiver: MessageReceiver | undefined;

  constructor(
    readonly stream: ChannelStream,
    private readonly maxFrameSize: number,
    /** Charged with the memory an unfinished frame holds here, beyond what the transport's window holds. */
    private readonly budget?: ByteBudget,
    /** Charged with what this side encoded until the transport took it: replies a peer leaves unread stay charged. */
    private readonly sendBudget?: ByteBudget,
  ) {
    this.decoder = new FrameDecoder(maxFrameSize);
  }

  /** Encodes and writes one message after everything sent before it; resolves when the transport took it. */
  send(message: WireMessage): Promise<void> {
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    this.flushBatch();
    return this.enqueue(segments, false);
  }

  /**
   * Sends an item. A stream's first two items are written on their own, so the first leaves at once (the
   * transports let a stream's first bytes go when it writes the second: architecture.md, "A stream's first
   * token"); later ones are encoded into a batch, written at the end of the turn (process.nextTick: after the
   * microtasks a producer that never waits runs in) or once it holds ITEM_BATCH_BYTES. Returns a promise only
   * when the producer must wait — a write the transport has not taken (backpressure, as `send`'s) — and
   * undefined when it may go on at once. A failed write is reported by the next call. Throws as `send` does on
   * an item it cannot encode.
   */
  sendItem(body: unknown): Promise<void> | undefined {
    if (this.writeFailure !== undefined) return Promise.reject(this.writeFailure);
    if (this.loneItems < 2 && this.batched === 0 && !this.tail) {
      this.loneItems++;
      const frame = this.loneItem(body);
      return frame ? this.enqueue([frame], false) : this.send({ type: 'item', body });
    }
    const start = this.batched;
    let end = encodeSmallItem(body, this.room(SMALL_ITEM_ROOM), start);
    if (end < 0) {
      const segments = encodeFrameSegments({ type: 'item', body }, this.maxFrameSize);
      if (segments.length > 1 || segments[0]!.length > BATCH_CAPACITY - start) {
        // A large item goes on its own, after what is batched.
        this.flushBatch();
        return this.enqueue(segments, false);
      }
      this.room(segments[0]!.length).set(segments[0]!, start);
      end = start + segments[0]!.length;
    } else if (end - start - FRAME_HEADER_BYTES > this.maxFrameSize) {
      encodeFrame({ type: 'item', body }, this.maxFrameSize); // throws FRAME_TOO_LARGE, as `send` would
    }
    this.batched = end;
    this.charge(end - start);
    if (end >= ITEM_BATCH_BYTES) return this.flushBatch();
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      process.nextTick(flushAtEndOfTurn, this);
    }
    return this.tail;
  }

  /**
   * A lone item's frame written without msgpackr where `encodeSmallItem` can (a short binary or ASCII body: a
   * stream's first token is on the way to the caller's first item, and msgpackr's pack was the costliest step
   * of it), in a frame of its own with the mux's headroom (frame-slab.ts); undefined for any other body.
   */
  private loneItem(body: unknown): Buffer | undefined {
    const end = encodeSmallItem(body, loneScratch, 0);
    if (end < 0) return undefined;
    if (end - FRAME_HEADER_BYTES > this.maxFrameSize) encodeFrame({ type: 'item', body }, this.maxFrameSize); // throws FRAME_TOO_LARGE
    const frame = allocFrame(end);
    loneScratch.copy(frame, 0, 0, end);
    return frame;
  }

  /**
   * The batch's buffer with room for `bytes` more. It starts small and doubles (to BATCH_CAPACITY at most), so a
   * stream whose write waits for credit holds about what it batched, not a whole batch's capacity. Never from
   * node's shared pool: on Node 24 it is 64 KiB and serves every allocUnsafe below 32 KiB, so a batch a stalled
   * peer leaves unsent would pin a whole slab (measured: 2,000 zero-window streams held 177 MB of ArrayBuffers
   * against 57 MB with allocUnsafeSlow).
   */
  private room(bytes: number): Buffer {
    const batch = this.batch;
    const needed = this.batched + bytes;
    if (batch && batch.length >= needed) return batch;
    const grown = Buffer.allocUnsafeSlow(Math.min(BATCH_CAPACITY, Math.max(needed, 2 * (batch?.length ?? FIRST_BATCH_BYTES / 2))));
    if (batch) batch.copy(grown, 0, 0, this.batched);
    return (this.batch = grown);
  }

  /**
   * The end of the turn in which items were batched: they go now, unless a write is still waiting for credit —
   * then they go when it settles, with whatever joined them meanwhile (one write instead of one per turn).
   */
  endOfTurn(): void {
    this.flushScheduled = false;
    if (!this.tail) this.flushBatch();
  }

  /** Hands the batch to the transport after the writes before it; returns that write (undefined: none batched). */
  private flushBatch(): Promise<void> | undefined {
    if (this.batched === 0) return undefined;
    const chunk = this.batch!.subarray(0, this.batched);
    this.batch = undefined; // the transport may hold the chunk until it is sent: the next batch gets a new buffer
    this.batched = 0;
    return this.enqueue([chunk], false, true);
  }

  /**
   * Writes `segments` once the writes before them settled (`last`: and ends our side with them). The bytes are
   * charged until the transport took them (`charged`: they were when they were batched).
   */
  private enqueue(segments: Uint8Array[], last: boolean, charged = false): Promise<void> {
    const bytes = byteLength(segments);
    if (this.writeFailure !== undefined) {
      if (charged) this.release(bytes);
      return Promise.reject(this.writeFailure);
    }
    const previous = this.tail;
    if (previous === undefined && segments.length === 1) {
      // Nothing before it: write now. A write the transport took at once (a unary call's request or reply, most
      // items) is settled here, with no promise chain, closures or budget entry for bytes this side never held.
      const written = last ? this.stream.endWith!(segments[0]!) : this.stream.write(segments[0]!);
      if (written === WRITTEN) {
        if (charged) this.release(bytes);
        return WRITTEN;
      }
      if (!charged) this.charge(bytes);
      return this.follow(written, bytes);
    }
    if (!charged) this.charge(bytes);
    const write = (): Promise<void> => this.write(segments, last);
    return this.follow(previous ? previous.then(write) : write(), bytes);
  }

  /** Tracks a write the transport has not taken yet: the stream's tail until it settles. */
  private follow(write: Promise<void>, bytes: number): Promise<void> {
    const done: Promise<void> = write.then(
      (): void => this.settled(done, bytes),
      (error: unknown): never => {
        this.settled(done, bytes, error);
        throw error;
      },
    );
    done.catch(ignore); // a batch written at the end of a turn has no caller to report to: the next send does
    this.tail = done;
    return done;
  }

  /** A write settled: its bytes are no longer held; a failure fails the stream's later sends. */
  private settled(write: Promise<void>, bytes: number, error?: unknown): void {
    this.release(bytes);
    if (error !== undefined) {
      this.writeFailure ??= error;
      if (this.batched > 0) {
        this.release(this.batched); // nothing batched will be written now
        this.batched = 0;
        this.batch = undefined;
      }
    }
    if (this.tail !== write) return;
    this.tail = undefined;
    if (!this.flushScheduled) this.flushBatch(); // items that joined the batch while this write waited
  }

  private write(segments: Uint8Array[], last: boolean): Promise<void> {
    const { stream } = this;
    const finalWrite = (chunk: Uint8Array): Promise<void> => (last ? stream.endWith!(chunk) : stream.write(chunk));
    // In order: a second write must not overtake a first one still waiting for credit.
    return segments.length === 1 ? finalWrite(segments[0]!) : stream.write(segments[0]!).then(() => finalWrite(segments[1]!));
  }

  /**
   * Sends the stream's last message and ends our side, after everything sent before it: one step where the
   * transport can fold the end into the write (ChannelStream.endWith: on the mux, one frame instead of two),
   * else a write and then an end.
   */
  sendLast(message: WireMessage): Promise<void> {
    const { stream } = this;
    if (!stream.endWith) return this.send(message).then(() => stream.end());
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    this.flushBatch();
    return this.enqueue(segments, true);
  }

  /**
   * Counts encoded bytes against `sendBudget`. The budget is told in steps of SEND_CHARGE_STEP, rounded up (never
   * less than is held): a batch's items would otherwise each cost a budget update (two map operations and the
   * agent's total), ~680 per 16 KiB batch of tokens, where this makes about five.
   */
  private charge(bytes: number): void {
    if (!this.sendBudget) return;
    this.unsent += bytes;
    if (this.unsent > this.chargedUnsent) this.tellBudget();
  }

  private release(bytes: number): void {
    if (!this.sendBudget) return;
    this.unsent -= bytes;
    this.tellBudget();
  }

  private tellBudget(): void {
    const charged = Math.ceil(this.unsent / SEND_CHARGE_STEP) * SEND_CHARGE_STEP;
    if (charged === this.chargedUnsent) return;
    this.chargedUnsent = charged;
    this.sendBudget!.set(this, charged);
  }

  /**
   * The next message if its bytes already arrived (a chunk held several frames), without touching the stream;
   * undefined when none did. Throws as `receive` does on a frame that breaks the rules.
   */
  takeReady(): WireMessage | undefined {
    return this.decoder.unread ? this.nextFrame() : undefined;
  }

  /** True when nothing beyond the messages already returned has been read: the stream may change hands. */
  get drained(): boolean {
    return this.decoder.idle;
  }

  /**
   * The next message if it already arrived whole (ChannelStream.readNow), without waiting; undefined when it did
   * not (then `receive` waits for it, or for the end). Throws as `receive` does on a frame that breaks the rules.
   */
  receiveNow(): WireMessage | undefined {
    const { stream } = this;
    for (;;) {
      const message = this.takeReady();
      if (message) return message;
      const chunk = stream.readNow?.();
      if (!chunk) return undefined;
      const whole = this.wholeFrame(chunk);
      if (whole) return whole;
      this.decoder.feed(chunk);
    }
  }

  /** The next message, or undefined when the peer ended the stream cleanly between frames. */
  async receive(): Promise<WireMessage | undefined> {
    for (;;) {
      const message = this.takeReady();
      if (message) return message;
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
      const whole = this.wholeFrame(chunk);
      if (whole) return whole;
      this.decoder.feed(chunk);
    }
  }

  /**
   * A chunk that is exactly one whole frame, with nothing decoded or pending before it (a call's request or
   * reply, one mux message), decoded where it lies: no list of frames and no view of its payload. Undefined for
   * any other chunk, which the decoder takes.
   */
  private wholeFrame(chunk: Uint8Array): WireMessage | undefined {
    if (!this.decoder.idle || chunk.length < FRAME_HEADER_BYTES) return undefined;
    const length = chunk.length - FRAME_HEADER_BYTES;
    if (readU32(chunk, 0) !== length || length > this.maxFrameSize) return undefined;
    this.lastFrameBytes = length;
    return decodePayloadAt(chunk, FRAME_HEADER_BYTES, chunk.length);
  }

  /**
   * The next frame of the chunk the decoder holds, decoded where it lies (no view of its payload, no list of a
   * chunk's frames); undefined once the chunk is read to its end. What an unfinished frame holds is charged to the
   * budget as it changes: when a frame that spanned chunks completes, and when a chunk ends inside one.
   */
  private nextFrame(): WireMessage | undefined {
    const decoder = this.decoder;
    let found: boolean;
    try {
      found = decoder.next();
    } catch (error) {
      this.budget?.set(this, 0); // FRAME_TOO_LARGE: the caller resets the stream
      throw error;
    }
    if (this.budget && decoder.footprint !== this.charged) {
      this.charged = decoder.footprint;
      this.budget.set(this, this.charged);
    }
    if (!found) return undefined;
    const { frameBytes, frameStart, frameEnd, frameViews } = decoder;
    decoder.release(); // the message holds what it needs of the bytes; a reader that waits holds none of them
    this.lastFrameBytes = frameEnd - frameStart;
    return decodePayloadAt(frameBytes, frameStart, frameEnd, DEFAULT_DECODE_LIMITS, frameViews);
  }

  /**
   * Push-style reading, where the stream offers it (ChannelStream.listen): every message from now on goes to
   * `receiver` in the transport's callback that brought its bytes, then the end or a failure; `receive` is not
   * used after it. False (and nothing changed) when the stream cannot push or messages are already decoded
   * here: then read with `receive`. A receiver that wants no more (it reset the stream) is told nothing further.
   */
  listen(receiver: MessageReceiver): boolean {
    const { stream } = this;
    if (!stream.listen || this.receiver || this.decoder.unread) return false;
    this.receiver = receiver;
    stream.listen(this);
    return true;
  }

  /** ChunkSink: a chunk for the push-style reader. */
  onChunk(chunk: Uint8Array): void {
    const receiver = this.receiver!;
    let message: WireMessage | undefined;
    try {
      message = this.wholeFrame(chunk);
      if (message) return receiver.onMessage(message);
      this.decoder.feed(chunk);
      while ((message = this.nextFrame())) receiver.onMessage(message);
    } catch (error) {
      // A frame that breaks the rules: the receiver resets the stream (as `receive`'s caller does).
      this.decoder.discard();
      receiver.onReadError(error);
    }
  }

  /** ChunkSink: the peer's end. */
  onEnd(): void {
    if (!this.decoder.idle) {
      this.budget?.set(this, 0);
      this.receiver!.onReadError(new AgentError('UNAVAILABLE', 'stream ended inside a frame: the connection was lost'));
      return;
    }
    this.receiver!.onMessage(undefined);
  }

  /** ChunkSink: a reset or the channel's loss. */
  onError(error: AgentError): void {
    this.budget?.set(this, 0);
    this.receiver!.onReadError(error);
  }

  evict(reason: AgentError): void {
    // Either budget may choose this stream (it holds an unfinished frame of the peer's and its own unsent replies).
    // The reply budget, when it is the one, dropped its entry already (then this `set` does nothing); when the
    // frame budget is, the entry is dropped here: the reset discards the unsent bytes, and with the 4 KiB steps a
    // later release to 0 would match `chargedUnsent` and never tell it (the stream counted, and kept, for good).
    // Either way the next charge tells the reply budget again.
    this.sendBudget?.set(this, 0);
    this.chargedUnsent = 0;
    this.stream.reset(reason);
  }
}

function ignore(): void {}

function flushAtEndOfTurn(framed: FramedStream): void {
  framed.endOfTurn();
}

function byteLength(segments: Uint8Array[]): number {
  return segments.length === 1 ? segments[0]!.length : segments[0]!.length + segments[1]!.length;
}
