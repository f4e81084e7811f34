import { AgentError, toAgentError, type AgentId, type ChannelPath } from '@agentlink/core';
import { closeCodeOf, errorCodeToNumber, type Channel, type ChannelStream, type OpenStreamOptions } from '@agentlink/core/transport';
import { fromNative } from './native-errors.js';
import type { NativeConnection, NativeStream } from './native.js';
import { PushReads } from './push-reads.js';
import { QuicChannelStream } from './quic-stream.js';

/** The ALPN id of agentlink/2: a unary or streamed call's request may carry the caller's end (native/src/tls.rs). */
export const ENDS_WITH_REQUEST_PROTOCOL = 'agentlink/2';

/** A QUIC connection as a Channel: streams map 1:1 to QUIC streams (no head-of-line blocking between calls). */
export class QuicChannel implements Channel {
  readonly kind = 'quic';
  path?: ChannelPath;
  readonly remoteAddress: string;
  readonly closed: Promise<AgentError>;
  private closeReason: AgentError | undefined;
  private streams = 0;
  /**
   * Set while the handshake runs on a connection handed over early (a 0-RTT dial to a known peer, or a resumed
   * peer's connection at 0.5-RTT): only idempotent (replay-safe) calls' streams are opened before it ends.
   */
  private handshake: Promise<boolean> | undefined;
  private early = 0;
  /** Reads of every stream of this connection arrive in batches (push-reads.ts). */
  private readonly reads: PushReads;
  /** Both peers speak agentlink/2 (the caller's end may come with its request); undefined until the peer's choice is known. */
  private endsWithRequest: boolean | undefined;

  constructor(
    private readonly connection: NativeConnection,
    readonly peer: AgentId,
    readonly initiator: 'local' | 'remote',
    onStream: (stream: ChannelStream, channel: Channel) => void,
  ) {
    this.remoteAddress = connection.remoteAddress;
    // Reads and the streams the peer opens come in batches from one engine task per connection (push-reads.ts).
    this.reads = new PushReads(connection, (native) => this.accepted(native, onStream));
    this.closed = connection.closed().then((message) => {
      this.closeReason ??= fromNative(new Error(message));
      connection.release(); // free the connection's state now, not at the next garbage collection
      return this.closeReason;
    });
    if (connection.earlyData === 'pending') {
      const done = connection.handshakeDone();
      this.handshake = done;
      void done.then(() => {
        if (this.handshake === done) this.handshake = undefined;
      });
    }
    if (!this.reads.running) void this.acceptStreams(onStream);
  }

  /**
   * 'none' after a full handshake; else how the early handshake went: 'pending', then 'accepted' (our 0-RTT data
   * was taken) or 'rejected' (the peer lost its ticket, e.g. it restarted: the calls sent in 0-RTT failed).
   */
  get earlyData(): NativeConnection['earlyData'] {
    return this.connection.earlyData;
  }

  /** Resolves once the handshake ended: false when the peer rejected our 0-RTT data (or the connection failed). */
  handshakeEnded(): Promise<boolean> {
    return this.connection.handshakeDone();
  }

  /** Streams opened before the handshake ended (their first bytes travel in 0-RTT). */
  get earlyStreams(): number {
    return this.early;
  }

  get isClosed(): boolean {
    return this.closeReason !== undefined;
  }

  /**
   * Streams open in JavaScript; with none, the last writes the engine still holds for this connection (a reply or
   * request of up to 16 KiB taken whole by `tryWriteFinish` and released here, whose bytes may still wait for the
   * peer's credit). The engine is asked only then — by the pool's idle checks, its eviction and its retiring,
   * never on a call's way — so a channel whose last reply is not out yet is not idle and is not closed under it.
   */
  get activeStreams(): number {
    if (this.streams > 0 || this.closeReason) return this.streams;
    return this.connection.heldWrites();
  }

  /** Round-trip time and counters as the QUIC engine sees them. */
  stats(): ReturnType<NativeConnection['stats']> {
    return this.connection.stats();
  }

  async openStream(options?: OpenStreamOptions): Promise<ChannelStream> {
    if (this.closeReason) throw this.closeReason;
    // A call that is not replay-safe never rides 0-RTT: it waits for the handshake (and so for the peer's proof).
    if (this.handshake && !options?.idempotent) {
      await this.handshake;
      if (this.closeReason) throw this.closeReason;
    }
    if (this.handshake) this.early++;
    let native: NativeStream | undefined;
    try {
      native = this.connection.tryOpenStream() ?? (await this.streamWithin(options?.signal));
    } catch (error) {
      // The engine fails an open only when the connection is gone (reset, timed out, closed): the channel is closed
      // from now on, before its `closed` notice (a macrotask) arrives. Otherwise a caller retrying in a loop that
      // never leaves the microtask queue was handed this channel again and again: a restarted peer's stateless
      // reset then failed every call for as long as the loop ran (peer-death.ts, 1 run in ~10).
      this.closeReason ??= fromNative(error);
      throw this.closeReason;
    }
    if (!native) throw toAgentError(options!.signal!.reason, 'CANCELLED'); // the opener gave up: the channel is fine
    const stream = this.track(native, true, this.endsWithRequestFor(options));
    if (options?.priority && options.priority !== 'normal') stream.setPriority(options.priority);
    return stream;
  }

  /**
   * The engine's next stream, which waits for the peer to allow one more (MAX_STREAMS), or the opener's abort: a peer
   * that allows few streams and holds them (a handler that never answers, a hostile peer never granting more) kept
   * such a call past its deadline until 2026-11-25 (test/stream-credit-wait.test.ts). The engine's open cannot be
   * withdrawn: a stream it gives after the abort is reset unused.
   */
  private async streamWithin(signal: AbortSignal | undefined): Promise<NativeStream | undefined> {
    const opening = this.connection.openStream();
    if (!signal) return opening;
    const discardLate = (): void => void opening.then((late) => late.reset(errorCodeToNumber('CANCELLED')), () => undefined);
    if (signal.aborted) {
      discardLate();
      return undefined;
    }
    let onAbort!: () => void;
    const aborted = new Promise<undefined>((resolve) => {
      onAbort = () => resolve(undefined);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const native = await Promise.race([opening, aborted]);
      if (!native) discardLate();
      return native;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * A stream at once when the engine can open one without waiting (the peer's stream limit allows it) and no early
   * handshake is running; undefined otherwise — then `openStream` waits, counts early streams or reports the
   * failure. Core then writes the call's request in the same turn as the call starts: no async open, no promise
   * hops before the request reaches the engine (measured ~0.06 ms of a call's first bytes, burst-timeline).
   */
  openStreamNow(options?: OpenStreamOptions): ChannelStream | undefined {
    if (this.closeReason || this.handshake) return undefined;
    let native: NativeStream | null;
    try {
      native = this.connection.tryOpenStream();
    } catch {
      return undefined; // the connection is gone: `openStream` fails the same way and closes the channel
    }
    if (!native) return undefined;
    const stream = this.track(native, true, this.endsWithRequestFor(options));
    if (options?.priority && options.priority !== 'normal') stream.setPriority(options.priority);
    return stream;
  }

  async close(reason = new AgentError('CLOSED', 'channel closed')): Promise<void> {
    if (this.closeReason) return;
    this.closeReason = reason;
    this.connection.close(closeCodeOf(reason), reason.message.slice(0, 512));
    await this.closed;
  }

  /**
   * A call stream we open ends our side with its request when the caller asks (`endsWithRequest`) and the peer
   * surely knows the rule: agentlink/2 negotiated, and the handshake over. During a 0-RTT handshake the
   * peer's choice is not known yet (a ticket's protocol is a guess until the server's reply), so an early
   * stream keeps agentlink/1's way, which an agentlink/2 peer reads the same.
   */
  private endsWithRequestFor(options: OpenStreamOptions | undefined): boolean {
    return options?.endsWithRequest === true && this.handshake === undefined && this.protocolEndsWithRequest();
  }

  /** agentlink/2 was negotiated (asked of the engine once, when the peer's choice is known). */
  private protocolEndsWithRequest(): boolean {
    if (this.endsWithRequest === undefined) {
      const protocol = this.connection.protocol;
      if (protocol === null) return false; // not known yet (a dialler's 0-RTT), or released: agentlink/1's way
      this.endsWithRequest = protocol === ENDS_WITH_REQUEST_PROTOCOL;
    }
    return this.endsWithRequest;
  }

  /** The protocol the handshake chose ('agentlink/2', 'agentlink/1'); null while a dialler's 0-RTT handshake runs. */
  get protocol(): string | null {
    return this.connection.protocol;
  }

  private track(native: NativeStream, opened: boolean, endsWithRequest: boolean): QuicChannelStream {
    this.streams++;
    const done = (failure?: AgentError): void => {
      this.streams--;
      // The peer rejected our 0-RTT data (the only failure the engine marks unprocessed; a retired channel's close
      // also marks its streams so, and then the channel is gone anyway): the handshake has ended,
      // whatever the engine's own notice of it (a separate callback, which may come later) says yet. The call is
      // resent at once; without this its new stream could still be counted as early.
      if (failure?.unprocessed) this.handshake = undefined;
    };
    return new QuicChannelStream(native, done, opened, this.reads, opened && endsWithRequest, !opened && endsWithRequest);
  }

  /**
   * A stream the peer opened, handed to core unless we closed the channel already: a closed channel processes no
   * stream that arrives on it (one the engine passed on before the close took effect). A retired channel's close
   * promises the peer exactly that (docs/protocol.md "Retired channels").
   */
  private accepted(native: NativeStream, onStream: (stream: ChannelStream, channel: Channel) => void): void {
    if (this.closeReason) return native.reset(errorCodeToNumber('UNAVAILABLE'));
    onStream(this.track(native, false, this.protocolEndsWithRequest()), this);
  }

  private async acceptStreams(onStream: (stream: ChannelStream, channel: Channel) => void): Promise<void> {
    // In batches: the streams a burst of calls opened arrive in one crossing out of the engine, not one each.
    for (;;) {
      const batch = await this.connection.acceptStreams();
      if (batch.length === 0) return;
      for (const native of batch) this.accepted(native, onStream);
    }
  }
}
