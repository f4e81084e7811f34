import { AgentError, type AgentId, type Refusal } from '@agentlink/core';
import { MUX_HEADER_BYTES, MuxedChannel, claimHeadroom, type Channel, type ChannelStream, type MessagePipe, type MuxOptions } from '@agentlink/core/transport';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { readFramesFirst } from './frame-reader.js';
import { TurnBatch } from './turn-batch.js';
import { webSocketHeaderBytes, writeWebSocketHeader } from './ws-frame-header.js';

/** WebSocket close codes (RFC 6455) used to say why a channel closed. */
const NORMAL_CLOSURE = 1000;
const PROTOCOL_ERROR = 1002;
const CLOSE_HANDSHAKE_MS = 2000;
/** `WebSocket.OPEN` (the type-only import of ws has no value). */
const OPEN = 1;

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
    /** ws's maxPayload on this socket: the largest message this side takes, whoever reads it (see FrameReader). */
    maxPayload: number;
  },
): MuxedChannel {
  const pipe = new WebSocketPipe(socket, raw, new TurnBatch(raw), init.role === 'dialer');
  const channel = new MuxedChannel({
    ...init.mux,
    kind: 'ws',
    peer: init.peer,
    remoteAddress: init.remoteAddress,
    role: init.role,
    onStream: init.onStream,
    onRefused: init.onRefused,
    // The largest mux body this side takes, announced to the peer.
    largestBodyTaken: init.maxPayload - MUX_HEADER_BYTES,
    pipe,
  });
  pipe.channel = channel;
  // The frames of calls are read here, in the TLS socket's data callback; ws reads the rest (frame-reader.ts).
  readFramesFirst(socket, raw, { isServer: init.role === 'listener', maxPayload: init.maxPayload, onMessage: (data) => channel.receive(data) });
  // What ws reads: messages in fragments or with a mask key that is not zero (other clients), and text.
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

/**
 * The mux's pipe over one WebSocket. A class, not an object literal with closures: every channel's pipe then has
 * one shape and one `bufferedAmount` getter on the prototype, which V8 inlines where the mux asks for room on
 * every write (`MuxedChannel.congested`); a literal's getter is a different function per channel, called
 * through the generic LoadIC each time.
 */
class WebSocketPipe implements MessagePipe {
  /** Set right after the channel is built (the channel needs the pipe first). */
  channel: MuxedChannel | undefined = undefined;
  /** One callback per socket (no closure per frame), for the frames the mux wants to hear have left (see `send`). */
  private readonly onSent = (): void => this.channel?.drained();

  constructor(
    private readonly socket: WebSocket,
    /** The TLS socket under `socket`, which ws's own sender writes to as well. */
    private readonly raw: Duplex,
    private readonly batch: TurnBatch,
    /** A client's frames carry a (zero) mask key. */
    private readonly masked: boolean,
  ) {}

  send(message: Uint8Array, flushBefore?: boolean, flushAfter?: boolean, notifySent?: boolean): void {
    this.batch.before(flushBefore === true);
    // A write callback only when the mux asks for one: node's stream then keeps its no-callback path (no closure
    // and no copy of the corked writes' list per flush) for the frames of calls one at a time.
    const onSent = notifySent === true ? this.onSent : undefined;
    // A frame with room in front of it (the codec's, past the mux header: a call's request or reply) goes with its
    // WebSocket header as one buffer, straight to the TLS socket, in order with what ws's sender wrote before it
    // (that sender never queues: no extension is negotiated). Anything else, or a socket no longer open (ws then
    // reports the write as after close), goes through ws.
    const length = message.length;
    const headerBytes = webSocketHeaderBytes(length, this.masked);
    const framed = this.socket.readyState === OPEN ? claimHeadroom(message, headerBytes) : undefined;
    if (framed) {
      writeWebSocketHeader(framed, headerBytes, length, this.masked);
      this.raw.write(framed, onSent);
    } else {
      this.socket.send(message, SEND_OPTIONS, onSent);
    }
    this.batch.after(length, flushAfter === true);
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  close(reason: AgentError): void {
    const socket = this.socket;
    const code = reason.code === 'PROTOCOL_ERROR' ? PROTOCOL_ERROR : NORMAL_CLOSURE;
    socket.close(code, truncateReason(reason.message));
    // A dead peer never answers the closing handshake: do not let it hold the socket (or the process).
    setTimeout(() => socket.terminate(), CLOSE_HANDSHAKE_MS).unref();
  }
}

/**
 * ws's options for every frame: none. A Uint8Array goes as a binary message by default, and ws spreads these into
 * its own options object per message: `{ binary: true }` cost a property copy per frame there.
 */
const SEND_OPTIONS = Object.freeze({});

/** A close reason must fit in 123 bytes of UTF-8. */
function truncateReason(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= 123 ? text : bytes.subarray(0, 120).toString('utf8') + '...';
}

