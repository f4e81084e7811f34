import { setTimeout as sleep } from 'node:timers/promises';
import { constants, type ClientHttp2Session, type Http2Session, type Http2Stream, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { AgentError, toAgentError, type AgentId, type ChannelPath, type Refusal } from '@agentlink/core';
import { muxOverStream, type Channel, type ChannelStream, type ConnectionActivity, type MuxedChannel, type OpenStreamOptions } from '@agentlink/core/transport';
import { Http2ChannelStream } from './http2-stream.js';
import { OutboundBudget } from './outbound-budget.js';
import { fromGoawayCode, http2CodeOf, toHttp2Code } from './reset-codes.js';
import { resetSoon } from './stream-reset.js';
import { requestStream } from './request-without-deprecation-cost.js';

export const AGENTLINK_PATH = '/agentlink';

/**
 * No content-type either way: nothing reads it, and each extra header costs node:http2 work on both sides
 * (building the header list, HPACK, the receiver's header object): 1.5–3 µs per round trip, measured.
 */
const RESPONSE_HEADERS = { ':status': 200 };
/**
 * Every call is a POST, which node leaves open for a body by default. No options object: passing one (even
 * `{ endStream: false }`, or a priority) made node's request() ~2.5 µs slower per call, measured.
 */
const REQUEST_HEADERS = { ':method': 'POST', ':path': AGENTLINK_PATH };
/** The one long-lived stream the client opens so the server can start calls too (HTTP/2 servers cannot). */
export const REVERSE_PATH = '/agentlink/reverse';
const REVERSE_WAIT_MS = 5000;
const DRAIN_POLL_MS = 20;
const STREAM_LIMIT_MARGIN = 0.2;
/** Default bytes one session's streams may hold in node's buffers unsent (see OutboundBudget, docs/security.md). */
export const DEFAULT_MAX_SESSION_BUFFERED = 16 * 1024 * 1024;

export interface Http2ChannelInit {
  onStream(stream: ChannelStream, channel: Channel): void;
  /** Report of a stream refused because it is not an agentlink request. */
  onRefused?(refusal: Refusal): void;
  maxSessionBuffered?: number;
  /**
   * A dialled session whose peer's SETTINGS have not arrived yet (the dial does not wait for them): until they do,
   * the pool is not held to nghttp2's assumed limit (see `streamLimit`), and streams past it wait here for them.
   */
  peerSettingsPending?: boolean;
}

/** Listener of refused streams: node emits 'error' when a stream is closed with a code, and crashes without one. */
function ignoreStreamError(): void {}


/**
 * One authenticated HTTP/2 session as a Channel: each agentlink call is one HTTP/2 stream (a POST whose request
 * and response bodies flow at the same time). After a GOAWAY the channel takes no new streams but lets the
 * ones in flight finish; the pool then opens a new session for new calls.
 */
export class Http2Channel implements Channel {
  readonly kind = 'http2';
  path?: ChannelPath;
  readonly closed: Promise<AgentError>;
  private closeReason: AgentError | undefined;
  private draining: AgentError | undefined;
  private streams = 0;
  /** Told when the first stream opens and the last one ends (a listener's eviction picks only idle connections). */
  activity: ConnectionActivity | undefined = undefined;
  /** The reverse mux has a stream open: it counts as one busy stream of the session. */
  private reverseBusy = false;
  /** Calls waiting for the peer's SETTINGS_MAX_CONCURRENT_STREAMS to allow another stream (FIFO). */
  private readonly slotWaiters: Array<() => void> = [];
  private resolveClosed!: (reason: AgentError) => void;
  /** The peer's SETTINGS have not arrived: its stream limit is nghttp2's assumption (100), not the peer's word. */
  private peerSettingsPending: boolean;
  /** Streams the server starts travel over core's mux inside the client's reverse stream. */
  private reverse: MuxedChannel | undefined;
  /**
   * Server side: the client's reverse stream, held bare until the server calls the client or the client sends on
   * it; only then are its mux, reader and response HEADERS made. Most clients are never called back, and an idle
   * peer's mux state was ~3 KiB of the server's memory per connection (docs/benchmarks.md).
   */
  private reverseCarrier: ServerHttp2Stream | undefined;
  private reverseReady: Promise<void> | undefined;
  private resolveReverse: (() => void) | undefined;
  private readonly onStream: (stream: ChannelStream, channel: Channel) => void;
  private readonly onRefused: Http2ChannelInit['onRefused'];
  /** Unsent bytes of all of this session's streams in node's buffers, bounded: a peer that never credits its windows holds them. */
  readonly outbound: OutboundBudget;

  constructor(
    private readonly session: Http2Session,
    readonly peer: AgentId,
    readonly remoteAddress: string,
    readonly initiator: 'local' | 'remote',
    init: Http2ChannelInit,
  ) {
    this.onStream = init.onStream;
    this.onRefused = init.onRefused;
    this.outbound = new OutboundBudget(init.maxSessionBuffered ?? DEFAULT_MAX_SESSION_BUFFERED);
    this.peerSettingsPending = init.peerSettingsPending === true;
    if (initiator === 'local') {
      // Each SETTINGS may change the peer's limit: streams waiting for a slot look again. The first ends the
      // assumed limit, and the streams held for it go now, not when others finish (long streams may never).
      session.on('remoteSettings', () => {
        this.peerSettingsPending = false;
        for (const wake of this.slotWaiters.splice(0)) wake();
      });
    }
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    session.on('goaway', (code: number) => {
      // Streams above the GOAWAY's last id fail with a retryable error; the rest finish normally.
      // A peer's close carries its reason's code (e.g. PERMISSION_DENIED); its plain CLOSED reads as UNAVAILABLE.
      // A retired channel's GOAWAY fails what we opened unanswered as unprocessed (resent elsewhere at once).
      this.draining ??= fromGoawayCode(code);
      void this.drain();
    });
    session.on('error', () => undefined); // 'close' follows
    // `on`, not `once`: node emits 'close' once, and a once-wrapper is three more objects per idle session.
    session.on('close', () => this.finish(this.draining ?? new AgentError('UNAVAILABLE', `HTTP/2 session with ${remoteAddress} closed`)));
    if (initiator === 'remote') {
      (session as ServerHttp2Session).on('stream', (stream, headers) => {
        const path = headers[':path'];
        const refusal = headers[':method'] !== 'POST' ? 'method' : path === REVERSE_PATH ? (this.reverseCarrier ? 'second reverse stream' : undefined) : path === AGENTLINK_PATH ? undefined : 'path';
        if (refusal) {
          // Not an agentlink request: refused (PROTOCOL_ERROR) and reported, never handled.
          stream.on('error', ignoreStreamError);
          resetSoon(stream, toHttp2Code('PROTOCOL_ERROR')); // inside nghttp2's callback: see stream-reset.ts
          const what = refusal === 'second reverse stream' ? refusal : `${refusal} ${String(headers[refusal === 'method' ? ':method' : ':path']).slice(0, 64)}`;
          init.onRefused?.({ stage: 'stream', reason: 'not-agentlink', kind: 'http2', remoteAddress, peer, code: 'PROTOCOL_ERROR', detail: what });
          return;
        }
        if (path === REVERSE_PATH) {
          this.reverseCarrier = stream;
          stream.on('error', ignoreStreamError); // a client's reset of it, before the mux (which listens too) exists
          // Bytes from the client (a SETTINGS of a larger mux window, a GOAWAY, a flood) make the mux at once.
          stream.once('data', (chunk: Buffer) => this.reverseFirstBytes(chunk));
          this.resolveReverse?.();
          return;
        }
        // Closed (node destroys the session only at the next turn, and delivers the HEADERS it read before that):
        // a retired channel's close promised the peer that what it opens from then on is never processed, and the
        // peer resends it elsewhere, so serving it here would run it twice.
        if (this.draining || this.closeReason) {
          stream.on('error', ignoreStreamError);
          resetSoon(stream, constants.NGHTTP2_REFUSED_STREAM); // never processed: the caller retries elsewhere
          return;
        }
        // The response HEADERS wait for the first reply bytes: one packet (and one wake-up of the caller), not two.
        const tracked = this.track(stream);
        tracked.respondWith = RESPONSE_HEADERS;
        this.onStream(tracked, this);
      });
    } else {
      const carrier = requestStream(session as ClientHttp2Session, { ':method': 'POST', ':path': REVERSE_PATH });
      this.reverse = this.reverseMux(carrier, 'listener');
    }
  }

  /** True once the channel takes no new streams: closed, or draining after a GOAWAY. */
  get isClosed(): boolean {
    return this.closeReason !== undefined || this.draining !== undefined || this.session.closed || this.session.destroyed;
  }

  /**
   * What the pool may keep open at once on this session: below the peer's SETTINGS_MAX_CONCURRENT_STREAMS. None
   * while the peer's SETTINGS are on their way (the first round trip of a session): the pool then hands out its
   * own `maxCallsPerChannel` slots, as it did when the dial waited for them, and the streams past nghttp2's
   * assumption wait in `openStream` for the SETTINGS — a round trip, not for calls to end.
   */
  get streamLimit(): number | undefined {
    return this.peerSettingsPending ? undefined : this.peerStreamLimit() - 1;
  }

  get activeStreams(): number {
    return this.streams + (this.reverse?.activeStreams ?? 0);
  }

  async openStream(options?: OpenStreamOptions): Promise<ChannelStream> {
    if (this.isClosed) throw this.closeReason ?? this.draining ?? new AgentError('UNAVAILABLE', 'HTTP/2 session is closing');
    if (this.initiator === 'remote') return (await this.waitForReverse()).openStream(options);
    // Queue rather than be refused: node does not hold requests beyond the peer's limit, it resets them.
    while (this.streams + 1 >= this.peerStreamLimit() && !this.isClosed) await this.slot(options?.signal);
    if (this.isClosed) throw this.closeReason ?? this.draining ?? new AgentError('UNAVAILABLE', 'HTTP/2 session is closing');
    // No HTTP/2 priority signal: RFC 9113 deprecates it and node warns on every use; agentlink orders calls itself.
    return this.track(requestStream(this.session as ClientHttp2Session, REQUEST_HEADERS));
  }

  /**
   * Waits for a slot under the peer's limit, or for the opener to give up: calls held here (past nghttp2's assumed
   * limit until the peer's SETTINGS, or past a limit the peer lowered) wait for the peer, and a peer that never
   * sends SETTINGS nor ends a stream would otherwise keep them past their deadline.
   */
  private slot(signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(toAgentError(signal.reason, 'CANCELLED'));
    return new Promise<void>((resolve, reject) => {
      const wake = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        const at = this.slotWaiters.indexOf(wake);
        if (at >= 0) this.slotWaiters.splice(at, 1);
        reject(toAgentError(signal!.reason, 'CANCELLED'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.slotWaiters.push(wake);
    });
  }

  /** Stops taking new streams (GOAWAY), lets the ones in flight finish (both directions), then closes. */
  async drain(): Promise<void> {
    this.draining ??= new AgentError('UNAVAILABLE', 'channel is draining');
    if (!this.session.closed && !this.session.destroyed) this.session.close();
    // The reverse stream stays open by design: end it once the calls on it and beside it are done.
    while (this.activeStreams > 0 && !this.closeReason) await sleep(DRAIN_POLL_MS, undefined, { ref: false });
    this.closeReverse(this.draining);
    await this.closed;
  }

  async close(reason = new AgentError('CLOSED', 'channel closed')): Promise<void> {
    if (this.closeReason) return;
    this.closeReason = reason;
    if (!this.session.destroyed) {
      // The GOAWAY tells the peer why (e.g. PERMISSION_DENIED), and goes first, on its own: sent with destroy(),
      // it followed the streams' resets and the socket's close, and the peer missed it (and destroy(undefined,
      // code) sends NO_ERROR: node's first parameter defaults to a code).
      const code = http2CodeOf(reason);
      this.session.goaway(code);
      const session = this.session;
      setImmediate(() => session.destroy(reason, code));
    }
    this.finish(reason);
    await this.closed;
  }

  private async waitForReverse(): Promise<MuxedChannel> {
    if (this.reverseCarrier) return this.serverReverse();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new AgentError('UNAVAILABLE', 'the peer opened no reverse stream: it cannot be called back on this session')), REVERSE_WAIT_MS);
    });
    // Made only when a call back waits for the reverse stream: most idle peers' channels never need it.
    this.reverseReady ??= new Promise((resolve) => (this.resolveReverse = resolve));
    try {
      await Promise.race([this.reverseReady, timeout]);
    } finally {
      clearTimeout(timer);
    }
    // Woken by the session's close (`finish`): the call fails with its reason now, not after REVERSE_WAIT_MS.
    if (this.closeReason) throw this.closeReason;
    return this.serverReverse();
  }

  /** Server side: the mux over the client's reverse stream, made on first use (`firstChunk`: bytes that came first). */
  private serverReverse(firstChunk?: Buffer): MuxedChannel {
    if (this.reverse) return this.reverse;
    const carrier = this.reverseCarrier!;
    if (carrier.destroyed || carrier.closed) throw new AgentError('UNAVAILABLE', 'the reverse stream closed: the peer cannot be called back on this session');
    this.reverse = this.reverseMux(carrier, 'dialer', firstChunk);
    return this.reverse;
  }

  /** The client sent on its reverse stream first: the mux is made now (nothing to make once the stream closed). */
  private reverseFirstBytes(chunk: Buffer): void {
    const carrier = this.reverseCarrier!;
    if (!this.reverse && !carrier.destroyed && !carrier.closed) this.serverReverse(chunk);
  }

  /** Ends the reverse stream: through its mux (a GOAWAY, then a reset) if it was made, else a reset alone. */
  private closeReverse(reason: AgentError): void {
    if (this.reverse) return void this.reverse.close(reason);
    const carrier = this.reverseCarrier;
    if (carrier) resetSoon(carrier, http2CodeOf(reason)); // never at once: see stream-reset.ts
  }

  private reverseMux(carrier: Http2Stream, role: 'dialer' | 'listener', firstChunk?: Buffer): MuxedChannel {
    const stream = new Http2ChannelStream(carrier, this.streamFailure, () => undefined, this.outbound);
    // The server answers the client's reverse request with its first bytes (HEADERS + DATA: one write).
    if (role === 'dialer') stream.respondWith = RESPONSE_HEADERS;
    if (firstChunk) stream.onData(firstChunk);
    const reverse = muxOverStream(stream, {
      kind: 'http2',
      peer: this.peer,
      remoteAddress: this.remoteAddress,
      role,
      onStream: (s) => this.onStream(s, this),
      onRefused: this.onRefused,
      // The client's side says nothing until it answers a call back: the server makes its side on first use.
      settingsWithFirstFrame: role === 'listener',
    });
    // The reverse stream's own calls (a server calling its client back) keep the session busy too.
    reverse.activity = this.reverseActivity;
    return reverse;
  }

  private readonly reverseActivity: ConnectionActivity = {
    busy: () => {
      this.reverseBusy = true;
      if (this.streams === 0) this.activity?.busy();
    },
    idle: () => {
      this.reverseBusy = false;
      if (this.streams === 0) this.activity?.idle();
    },
  };

  /**
   * Streams we open at once: the peer's limit, less the reverse stream, less a margin: node servers count a
   * stream until their JavaScript has finished with it, a little after the protocol closed it, and reset the
   * excess with ENHANCE_YOUR_CALM (seen on Node 24 at 50 streams).
   */
  private peerStreamLimit(): number {
    const limit = this.session.remoteSettings.maxConcurrentStreams ?? Number.POSITIVE_INFINITY;
    return Math.max(2, limit - Math.ceil(limit * STREAM_LIMIT_MARGIN));
  }

  private track(stream: Http2Stream): Http2ChannelStream {
    if (this.streams++ === 0 && !this.reverseBusy) this.activity?.busy();
    return new Http2ChannelStream(stream, this.streamFailure, this.streamDone, this.outbound);
  }

  /** Why a stream ended without a reason of its own (shared by the channel's streams: no closures per call). */
  private readonly streamFailure = (): AgentError => this.closeReason ?? this.draining ?? new AgentError('UNAVAILABLE', 'HTTP/2 session closed');

  private readonly streamDone = (): void => {
    if (--this.streams === 0 && !this.reverseBusy) this.activity?.idle();
    this.slotWaiters.shift()?.();
  };

  private finish(reason: AgentError): void {
    this.closeReason ??= reason;
    for (const wake of this.slotWaiters.splice(0)) wake();
    this.resolveReverse?.(); // calls back waiting for the reverse stream fail with the close (waitForReverse)
    this.closeReverse(this.closeReason);
    this.resolveClosed(this.closeReason);
  }
}
