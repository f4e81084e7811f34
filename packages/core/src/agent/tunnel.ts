import { AgentError, toAgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { decodePayload, encodeFrame } from '../wire/codec.js';
import { FrameDecoder } from '../wire/frame-decoder.js';
import type { ChannelPool } from './channel-pool.js';
import type { OutboundCall } from './outbound-call.js';

/**
 * Opens a tunnel: a `tunnel` request, the handler's one reply, then the raw stream. Reads exactly the reply's
 * frame, so bytes the peer sends right behind it reach the caller's first read. The pool slot is released
 * once the tunnel is open: a tunnel lasts as long as its owner wants and must not hold back calls.
 */
export async function openTunnel(pool: ChannelPool, call: OutboundCall, maxFrameSize: number): Promise<{ stream: ChannelStream; accepted: unknown }> {
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
    const { payload, rest } = await readOneFrame(stream, maxFrameSize);
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
export async function readOneFrame(stream: ChannelStream, maxFrameSize: number): Promise<{ payload: Uint8Array; rest: Uint8Array }> {
  const decoder = new FrameDecoder(maxFrameSize);
  for (;;) {
    const chunk = await stream.read();
    if (chunk === undefined) throw new AgentError('UNAVAILABLE', 'peer ended the stream before accepting the tunnel');
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
