import type { AgentError } from './errors.js';
import type { AgentId } from './identity/agent-id.js';
import type { TlsCredentials } from './identity/certificate.js';
import type { Identity } from './identity/identity.js';
import type { Priority } from './wire/messages.js';
import type { Refusal } from './listener/refusal.js';
import type { ChunkSink } from './util/chunk-queue.js';

/**
 * The contract every channel package implements. Small on purpose (like nats.js's transport): an authenticated
 * connection to one peer carrying bidirectional byte streams. Everything above bytes — framing, calls,
 * deadlines, cancellation, errors — lives in core and behaves the same on every channel.
 */

export type ChannelKind = 'ws' | 'quic' | 'http2' | 'relay' | (string & {});

/** One bidirectional byte stream. One agentlink call uses exactly one stream. */
export interface ChannelStream {
  /**
   * Resolves once the transport took the bytes within its flow-control credit: this is the backpressure. A
   * transport that took them before returning returns `WRITTEN` (from `@agentlink/core/transport`): core then
   * settles the write at once, with no promise chain of its own.
   */
  write(chunk: Uint8Array): Promise<void>;
  /** Ends our sending side; the peer reads the end after all written bytes. */
  end(): Promise<void>;
  /**
   * `write(chunk)` then `end()` in one step, where the transport can say both at once (the mux: one frame with
   * the FIN flag instead of two). Optional: core falls back to write and end.
   */
  endWith?(chunk: Uint8Array): Promise<void>;
  /**
   * Reads the next chunk; resolves undefined once the peer ended its side.
   * Rejects with an AgentError when the stream was reset (locally: with the given error; remotely: with the code
   * the peer sent) or the channel closed.
   */
  read(): Promise<Uint8Array | undefined>;
  /**
   * A chunk that already arrived, taken without waiting; undefined when none did (the end and failures are only
   * reported by `read`). Optional: lets core take a request that came with the stream's opening without a timer
   * or a promise.
   */
  readNow?(): Uint8Array | undefined;
  /**
   * Push-style reading: hands `sink` the chunks already queued and every later one, then the end or the failure,
   * in the transport's own callback (no promise per chunk); `read` is not used after it. Optional: core reads a
   * unary call's reply this way where it can (no async iterator, no promise hops), and falls back to `read`.
   */
  listen?(sink: ChunkSink): void;
  /**
   * Aborts both directions. The peer's pending and later reads/writes fail with `reason.code`; ours with
   * `reason` itself. Idempotent; a no-op once the stream is done.
   */
  reset(reason: AgentError): void;
  /** Orders this stream's outgoing data against other streams of the channel, where the transport can. */
  setPriority?(priority: Priority): void;
  /**
   * Set on a stream opened with `OpenStreamOptions.endsWithRequest` whose transport ends the opener's side with its first write
   * (QUIC between peers that negotiated agentlink/2: the request and its FIN leave together). Core then writes
   * the request as the stream's last write (`endWith`); nothing can follow it, so giving up is the reset alone
   * (the reason's code reaches the peer, not its text), and the opener's later `end()` is a no-op.
   */
  readonly endsWithRequest?: boolean;
  /**
   * Set on a stream the peer opened when its opener may end its side with its request (see `endsWithRequest`):
   * for a unary or streamed call that end is not a cancel. Core then reads once more after it: that read fails
   * with the opener's code when the opener gives up, and resolves (undefined) once our side ended.
   */
  readonly peerEndsWithRequest?: boolean;
}

/** Options for {@link Channel.openStream}. */
export interface OpenStreamOptions {
  priority?: Priority;
  signal?: AbortSignal;
  /**
   * The stream carries a call marked idempotent (replay-safe). A channel whose handshake is still running (QUIC
   * 0-RTT to a known peer) may send such a stream's data before the handshake ends, where an attacker could
   * replay it; every other stream waits for the handshake.
   */
  idempotent?: boolean;
  /**
   * The opener will send nothing on the stream after its first writes but an abort (a cancel message, a
   * reset): a unary or server-streaming call's request. A transport may then end the opener's side when the
   * peer ends its own, instead of a separate end from the opener (the mux leaves out the caller's FIN; see
   * docs/protocol.md). The opener still calls `end()` once it read the peer's end; that is then a no-op.
   */
  endsWithPeer?: boolean;
  /**
   * The opener may end its side with its first write, where the transport can send both together (QUIC on
   * agentlink/2; then the stream says `endsWithRequest`): a unary call's request. A cancel can then carry its
   * code only, not its text (docs/protocol.md "Ending with the request"). A streamed call does not ask: leaving
   * a stream early is common, and its handler gets the reason's text.
   */
  endsWithRequest?: boolean;
  /**
   * The opener waits for an answer to its first write while its turn goes on (a streamed call's request: the
   * caller's `for await` waits for the first item). A transport that batches the writes of a turn (the mux over
   * a WebSocket) sends that first write at once instead of at the end of the turn.
   */
  firstWriteAtOnce?: boolean;
}

/** How a channel reaches its peer: straight to a listening address, through a punched NAT, or via a relay. */
export type ChannelPath = 'direct' | 'punched' | 'relay';

/** An authenticated connection to one peer, carrying bidirectional {@link ChannelStream}s. */
export interface Channel {
  readonly kind: ChannelKind;
  /** Set by whoever made the channel when it is not a plain direct one (NAT traversal); direct when absent. */
  path?: ChannelPath;
  /** The authenticated peer: the key it proved during the handshake. */
  readonly peer: AgentId;
  readonly remoteAddress: string;
  /** Who opened the channel: when two agents dial each other at once, both keep the one the lower AgentId dialled. */
  readonly initiator: 'local' | 'remote';
  /** Streams open on this channel now, in either direction; a retired channel closes when this reaches 0. */
  readonly activeStreams: number;
  /** Streams the peer lets us have open at once, when the transport knows it (HTTP/2 SETTINGS); the pool keeps below it. */
  readonly streamLimit?: number;
  /** Opens a stream to the peer; rejects with an AgentError when the channel is closed or refuses more streams. */
  openStream(options?: OpenStreamOptions): Promise<ChannelStream>;
  /**
   * A stream at once, without a promise, when the channel can open one without waiting (the mux: a stream is
   * announced by its first frame); undefined when it cannot now — then `openStream` says why or waits. Optional.
   */
  openStreamNow?(options?: OpenStreamOptions): ChannelStream | undefined;
  /** Closes the channel; every open stream fails with `reason` (CLOSED when omitted). */
  close(reason?: AgentError): Promise<void>;
  /** Resolves with the reason once the channel is closed, by either side or by failure. Never rejects. */
  readonly closed: Promise<AgentError>;
  readonly isClosed: boolean;
}

/** What core gives a transport when it listens or dials. */
export interface TransportContext {
  identity: Identity;
  /** TLS key and self-signed certificate of `identity` (see docs/security.md). */
  tls: TlsCredentials;
  /** Called for every stream a peer opens on a channel of this agent. */
  onStream(stream: ChannelStream, channel: Channel): void;
  /** Report of a peer turned away (limits, handshake, stream refusals); the agent publishes and counts it. */
  onRefused?(refusal: Refusal): void;
}

export interface ListenContext extends TransportContext {
  /**
   * Called for every channel a peer opened to us, after authentication; `path` when whoever made it knows it is not
   * a plain direct one (a plugin's punched or relayed channel). The pool sees it with its path from the start.
   */
  onChannel(channel: Channel, path?: ChannelPath): void;
}

export interface DialContext extends TransportContext {
  /** The AgentId being dialled: the channel must fail with UNAUTHENTICATED unless the peer proves this key. */
  expectedPeer: AgentId;
  signal: AbortSignal;
}

/** What {@link Transport.listen} returns: the addresses it serves and a way to stop. */
export interface Listener {
  /** Dialable URLs, e.g. `wss://127.0.0.1:4433/agentlink`. */
  readonly addresses: readonly string[];
  /** Stops accepting; channels already accepted stay open until closed. */
  close(): Promise<void>;
}

/** A channel kind an agent can use, made by a factory such as `webSocket({ port: 0 })`. */
export interface Transport {
  readonly kind: ChannelKind;
  /** URL protocols this transport dials, e.g. `['wss:']`. */
  readonly protocols: readonly string[];
  /** Starts accepting channels; a transport configured without a listen address may return no addresses. */
  listen(context: ListenContext): Promise<Listener>;
  /** Connects to `address` and authenticates the peer; rejects with an AgentError (UNAVAILABLE, UNAUTHENTICATED, DEADLINE_EXCEEDED, CANCELLED). */
  dial(address: URL, context: DialContext): Promise<Channel>;
  /** Releases what the transport holds beyond its listener and channels (e.g. a QUIC endpoint's socket). */
  close?(): Promise<void>;
}
