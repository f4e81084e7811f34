import { AgentError, toAgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { FrameDecoder } from '../wire/frame-decoder.js';
import { MuxedChannel, type MuxedChannelInit } from './muxed-channel.js';
import { MAX_MUX_BODY, MUX_HEADER_BYTES } from './mux-frame.js';

/**
 * A MuxedChannel carried inside one byte stream of another channel, each mux frame behind a u32 length. Used
 * where a transport cannot open streams in one direction (an HTTP/2 server cannot start requests): the other
 * side opens one long-lived stream, and streams in the missing direction are multiplexed over it.
 */
export function muxOverStream(carrier: ChannelStream, init: Omit<MuxedChannelInit, 'pipe'>): MuxedChannel {
  let buffered = 0;
  // What a peer may send, not what this side sends: a lower `maxChunk` here must not refuse a peer's full frames.
  const maxFrame = MUX_HEADER_BYTES + MAX_MUX_BODY;
  const channel: MuxedChannel = new MuxedChannel({
    ...init,
    pipe: {
      send(message) {
        const frame = Buffer.allocUnsafe(4 + message.length);
        frame.writeUInt32BE(message.length, 0);
        frame.set(message, 4);
        buffered += frame.length;
        carrier.write(frame).then(
          () => {
            buffered -= frame.length;
            channel.drained();
          },
          (error: unknown) => channel.pipeClosed(toAgentError(error, 'UNAVAILABLE')),
        );
      },
      get bufferedAmount() {
        return buffered;
      },
      close(reason) {
        carrier.reset(reason);
      },
    },
  });
  void (async () => {
    const decoder = new FrameDecoder(maxFrame);
    try {
      for (let chunk = await carrier.read(); chunk; chunk = await carrier.read()) {
        for (const message of decoder.push(chunk)) channel.receive(message);
      }
      channel.pipeClosed(new AgentError('UNAVAILABLE', 'reverse stream ended'));
    } catch (error) {
      const reason = toAgentError(error, 'UNAVAILABLE');
      if (reason.code === 'FRAME_TOO_LARGE') void channel.close(new AgentError('PROTOCOL_ERROR', reason.message));
      else channel.pipeClosed(reason);
    }
  })();
  return channel;
}
