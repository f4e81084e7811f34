import { AgentError, toAgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { decodePayload, encodeFrame } from '../wire/codec.js';
import { FrameDecoder } from '../wire/frame-decoder.js';
import { MAX_TRANSPARENT_RETRIES } from './call-attempt.js';
import type { ChannelPool } from './channel-pool.js';
import type { CallOptions, OutboundCall } from './outbound-call.js';

/**
 * Largest accepting reply `openTunnel` reads by default (64 KiB, the rendezvous's whole control frame): an
 * acceptance is a small body, and the bytes of an unfinished reply are held outside every inbound budget (the
 * tunnel's stream is read by the caller, not by core's framed reader), so a peer declaring the agent's largest
 * frame (16 MiB) and sending all but its last byte held 16 MiB per tunnel until the call's deadline.
 */
export const MAX_TUNNEL_ACCEPTANCE_BYTES = 64 * 1024;

export interface TunnelOptions extends CallOptions {
  /**
   * Largest accepting reply (its frame's payload) read, in bytes (default {@link MAX_TUNNEL_ACCEPTANCE_BYTES}, at
   * most the agent's `maxFrameSize`); a larger one fails the opening with `FRAME_TOO_LARGE` at its length header.
   */
  maxAcceptBytes?: number;
}

/**
 * Opens a tunnel: a `tunnel` request, the handler's one reply, then the raw stream. Reads exactly the reply's
 * frame, so bytes the peer sends right behind it reach the caller's first read. The pool slot is released
 * once the tunnel is open: a tunnel lasts as long as its owner wants and must not hold back calls. The reply is
 * read up to `maxAcceptBytes`: what it holds is charged to no budget.
 */
export async function openTunnel(pool: ChannelPool, call: OutboundCall, maxFrameSize: number, maxAcceptBytes: number): Promise<{ stream: ChannelStream; accepted: unknown }> {
  // An opening the peer refused unprocessed (a refused stream, a retired or idle channel's close that crossed it:
  // docs/protocol.md "Retired channels") never reached its handler: it is made again, as a call is
  // (call-attempt.ts), unless a byte of the reply had come (the handler ran).
  for (let resends = 0; ; resends++) {
    const progress = { replyBegan: false };
    try {
      return await openTunnelOnce(pool, call, maxFrameSize, maxAcceptBytes, progress);
    } catch (error) {
      const resendable = error instanceof AgentError && error.unprocessed && !progress.replyBegan && !call.abortReason;
      if (!resendable || resends >= MAX_TRANSPARENT_RETRIES) throw error;
    }
  }
}

async function openTunnelOnce(
  pool: ChannelPool,
  call: OutboundCall,
  maxFrameSize: number,
  maxAcceptBytes: number,
  progress: { replyBegan: boolean },
): Promise<{ stream: ChannelStream; accepted: unknown }> {
  const channel = pool.tryReserve(call.peer) ?? (await pool.reserve(call.peer, call.priority, call.signal));
  let stream: ChannelStream | undefined;
  // Tunnels skip the interceptors: the call's own signal is their one abort route.
  const onAbort = (): void => stream?.reset(call.abortReason!);
  call.signal.addEventListener('abort', onAbort, { once: true });
  try {
    stream = await channel.openStream({ priority: call.priority });
    if (call.abortReason) throw call.abortReason;
    const request = { type: 'request', method: call.method, timeoutMs: call.remainingMs(), priority: call.priority, metadata: call.metadata, body: call.body, mode: 'tunnel' } as const;
    await stream.write(encodeFrame(request, maxFrameSize));
    const { payload, rest } = await readOneFrame(stream, maxAcceptBytes, progress);
    const reply = decodePayload(payload);
    if (reply.type === 'error') throw new AgentError(reply.code, reply.message, { remote: true });
    if (reply.type !== 'response') throw new AgentError('PROTOCOL_ERROR', `${call.method}: unexpected ${reply.type} opening a tunnel`);
    return { stream: rest.length > 0 ? new PrefixedStream(stream, rest) : stream, accepted: reply.body };
  } catch (error) {
    const failure = call.abortReason ?? toAgentError(error, 'UNAVAILABLE');
    stream?.reset(failure);
    throw failure;
  } finally {
    call.signal.removeEventListener('abort', onAbort);
    pool.release(channel);
  }
}

/**
 * Reads one length-prefixed frame and returns it with whatever bytes followed it in the last chunk. The frame is
 * joined by core's FrameDecoder: a peer that sends its reply a byte at a time costs linear copying and one piece
 * per half of what arrived (PartialFrame), not a copy of everything so far per chunk (the rendezvous reads a
 * stranger's reply this way when it relays).
 */
export async function readOneFrame(
  stream: ChannelStream,
  maxFrameSize: number,
  progress?: { replyBegan: boolean },
): Promise<{ payload: Uint8Array; rest: Uint8Array }> {
  const decoder = new FrameDecoder(maxFrameSize);
  for (;;) {
    const chunk = await stream.read();
    if (chunk === undefined) throw new AgentError('UNAVAILABLE', 'peer ended the stream before accepting the tunnel');
    if (progress && chunk.length > 0) progress.replyBegan = true;
    decoder.feed(chunk);
    if (decoder.next()) {
      const payload = decoder.frameBytes.subarray(decoder.frameStart, decoder.frameEnd);
      return { payload, rest: decoder.takeUnread() };
    }
  }
}

/** A stream whose first read returns bytes that were read ahead of it. */
class PrefixedStream implements ChannelStream {
  constructor(
    private readonly inner: ChannelStream,
    private prefix: Uint8Array | undefined,
  ) {}

  write(chunk: Uint8Array): Promise<void> {
    return this.inner.write(chunk);
  }

  end(): Promise<void> {
    return this.inner.end();
  }

  read(): Promise<Uint8Array | undefined> {
    const prefix = this.prefix;
    if (prefix) {
      this.prefix = undefined;
      return Promise.resolve(prefix);
    }
    return this.inner.read();
  }

  reset(reason: AgentError): void {
    this.inner.reset(reason);
  }
}
