import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import type { BudgetHolder, ByteBudget } from '../agent/byte-budget.js';
import { decodePayload, encodeFrameSegments } from './codec.js';
import { FrameDecoder } from './frame-decoder.js';
import type { WireMessage } from './messages.js';

/** Whole agentlink messages over a channel's byte stream: the one place framing meets a transport. */
export class FramedStream implements BudgetHolder {
  private readonly decoder: FrameDecoder;
  private readonly ready: Uint8Array[] = [];
  /** Payload bytes of the message `receive` returned last (what it cost the peer's window, less the header). */
  lastFrameBytes = 0;
  /** Bytes of sends the transport has not taken yet (they wait for the peer's credit). */
  private unsent = 0;

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
    // In order: a second write must not overtake a first one still waiting for credit.
    const written = segments.length === 1 ? this.stream.write(segments[0]!) : this.stream.write(segments[0]!).then(() => this.stream.write(segments[1]!));
    return this.charged(written, segments);
  }

  /**
   * Sends the stream's last message and ends our side: one step where the transport can fold the end into the
   * write (ChannelStream.endWith: on the mux, one frame instead of two), else a write and then an end.
   */
  sendLast(message: WireMessage): Promise<void> {
    const { stream } = this;
    if (!stream.endWith) return this.send(message).then(() => stream.end());
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    const written =
      segments.length === 1 ? stream.endWith(segments[0]!) : stream.write(segments[0]!).then(() => stream.endWith!(segments[1]!));
    return this.charged(written, segments);
  }

  /** Charges the send budget with `segments` until `written` settles (the transport took them). */
  private charged(written: Promise<void>, segments: Uint8Array[]): Promise<void> {
    const sendBudget = this.sendBudget;
    if (!sendBudget) return written;
    const bytes = segments.length === 1 ? segments[0]!.length : segments[0]!.length + segments[1]!.length;
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

  /** True when nothing beyond the messages already returned has been read: the stream may change hands. */
  get drained(): boolean {
    return this.ready.length === 0 && this.decoder.idle;
  }

  /**
   * The next message if it already arrived whole (ChannelStream.readNow), without waiting; undefined when it did
   * not (then `receive` waits for it, or for the end). Throws as `receive` does on a frame that breaks the rules.
   */
  receiveNow(): WireMessage | undefined {
    const { stream } = this;
    for (;;) {
      const payload = this.ready.shift();
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
      const payload = this.ready.shift();
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

  /** Feeds a chunk to the decoder: its whole frames become ready, the rest is charged to the budget. */
  private take(chunk: Uint8Array): void {
    let frames: Uint8Array[];
    try {
      frames = this.decoder.push(chunk);
    } catch (error) {
      this.budget?.set(this, 0); // FRAME_TOO_LARGE: the caller resets the stream
      throw error;
    }
    for (const frame of frames) this.ready.push(frame);
    this.budget?.set(this, this.decoder.footprint);
  }

  evict(reason: AgentError): void {
    this.stream.reset(reason);
  }
}
