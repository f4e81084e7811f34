import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { decodePayload, encodeFrame } from './codec.js';
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
    return this.stream.write(encodeFrame(message, this.maxFrameSize));
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
