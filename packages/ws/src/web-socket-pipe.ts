import { AgentError, type AgentId, type Refusal } from '@agentlink/core';
import { MuxedChannel, type Channel, type ChannelStream, type MuxOptions } from '@agentlink/core/transport';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { TurnBatch } from './turn-batch.js';

/** WebSocket close codes (RFC 6455) used to say why a channel closed. */
const NORMAL_CLOSURE = 1000;
const PROTOCOL_ERROR = 1002;
const CLOSE_HANDSHAKE_MS = 2000;

/**
 * Turns an open, authenticated WebSocket into an agentlink Channel: each binary message is one mux frame.
 * Everything else (streams, flow control, reasons) is core's MuxedChannel.
 */
export function channelOverWebSocket(
  socket: WebSocket,
  /** The TLS socket under the WebSocket, corked per turn so frames written together leave in few writes. */
  raw: Duplex,
  init: {
    peer: AgentId;
    remoteAddress: string;
    role: 'dialer' | 'listener';
    onStream(stream: ChannelStream, channel: Channel): void;
    /** Refusals of the mux (streams past its limit, a peer that does not read), for the agent to count. */
    onRefused?(refusal: Refusal): void;
    mux?: MuxOptions;
  },
): Channel {
  // One shared callback per socket (no closure per frame): each completed send may have drained the buffer.
  const onSent = (): void => channel.drained();
  const batch = new TurnBatch(raw);
  const channel = new MuxedChannel({
    ...init.mux,
    kind: 'ws',
    peer: init.peer,
    remoteAddress: init.remoteAddress,
    role: init.role,
    onStream: init.onStream,
    onRefused: init.onRefused,
    pipe: {
      send: (message, flushBefore, flushAfter) => {
        batch.before(flushBefore === true);
        socket.send(message, { binary: true }, onSent);
        batch.after(message.length, flushAfter === true);
      },
      get bufferedAmount() {
        return socket.bufferedAmount;
      },
      close: (reason) => {
        const code = reason.code === 'PROTOCOL_ERROR' ? PROTOCOL_ERROR : NORMAL_CLOSURE;
        socket.close(code, truncateReason(reason.message));
        // A dead peer never answers the closing handshake: do not let it hold the socket (or the process).
        setTimeout(() => socket.terminate(), CLOSE_HANDSHAKE_MS).unref();
      },
    },
  });
  socket.on('message', (data, isBinary) => {
    if (!isBinary) {
      void channel.close(new AgentError('PROTOCOL_ERROR', 'text message on an agentlink channel'));
      return;
    }
    channel.receive(data as Buffer);
  });
  socket.on('close', (code, reason) => {
    channel.pipeClosed(new AgentError('UNAVAILABLE', `connection to ${init.remoteAddress} closed (${code} ${reason.toString()})`.trim()));
  });
  socket.on('error', () => {
    // 'close' follows every 'error'; the channel reports it there.
  });
  return channel;
}

/** A close reason must fit in 123 bytes of UTF-8. */
function truncateReason(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= 123 ? text : bytes.subarray(0, 120).toString('utf8') + '...';
}

