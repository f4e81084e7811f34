import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { decodePayload, encodeFrameSegments } from './codec.js';
import { FrameDecoder } from './frame-decoder.js';
import type { WireMessage } from './messages.js';

/** Whole agentlink messages over a channel's byte stream: the one place framing meets a transport. */
export class FramedStream {
  private readonly decoder: FrameDecoder;
  private readonly ready: Uint8Array[] = [];

  constructor(
    readonly stream: ChannelStream,
    private readonly maxFrameSize: number,
  ) {
    this.decoder = new FrameDecoder(maxFrameSize);
  }

  /** Encodes and writes one message; resolves when the transport accepted it (backpressure). */
  send(message: WireMessage): Promise<void> {
    const segments = encodeFrameSegments(message, this.maxFrameSize);
    if (segments.length === 1) return this.stream.write(segments[0]!);
    // In order: a second write must not overtake a first one still waiting for credit.
    return this.stream.write(segments[0]!).then(() => this.stream.write(segments[1]!));
  }

  /** True when nothing beyond the messages already returned has been read: the stream may change hands. */
  get drained(): boolean {
    return this.ready.length === 0 && this.decoder.idle;
  }

  /** The next message, or undefined when the peer ended the stream cleanly between frames. */
  async receive(): Promise<WireMessage | undefined> {
    for (;;) {
      const payload = this.ready.shift();
      if (payload) return decodePayload(payload);
      const chunk = await this.stream.read();
      if (chunk === undefined) {
        if (!this.decoder.idle) throw new AgentError('PROTOCOL_ERROR', 'stream ended inside a frame');
        return undefined;
      }
      for (const frame of this.decoder.push(chunk)) this.ready.push(frame);
    }
  }
}
