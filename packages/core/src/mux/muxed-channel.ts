import { AgentError, errorCodeFromNumber, errorCodeToNumber } from '../errors.js';
import { closeCodeOf, peerCloseError } from '../retired-close.js';
import type { Channel, ChannelKind, ChannelPath, ChannelStream, OpenStreamOptions } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import {
  encodeGoaway,
  encodeMuxFrame,
  encodeU32Frame,
  featuresTaking,
  flagsAllowed,
  INITIAL_WINDOW,
  largestBodyOf,
  MAX_MUX_BODY,
  MUX_FLAG_BITS,
  MUX_HEADER_BYTES,
  MuxFeature,
  MuxFrameFlag,
  MuxFrameType,
} from './mux-frame.js';
import { resolveMuxOptions, type MuxOptions } from './mux-options.js';
import { MuxStream, type MuxStreamHost } from './mux-stream.js';
import { readU32 } from '../util/bytes.js';
import { WeightedPriorityQueue } from '../scheduler/priority-queue.js';
import type { Refusal } from '../listener/refusal.js';
import type { ConnectionActivity } from '../listener/connection-groups.js';

/** The one ordered, message-preserving pipe a channel without native streams provides (a WebSocket, a relay). */
export interface MessagePipe {
  /**
   * Queues one message for the peer, in order. A pipe may batch the messages of one event-loop turn into one
   * write (by turn and by a byte budget); `flushBefore` (a stream's second data frame) asks it to send what it
   * batched so far now: a producer that writes a burst without waiting must not hold its first token.
   * `flushAfter` (a stream's first frame that someone waits for: a streamed call's request, a stream's first
   * item) asks it to send this message, with what it batched before it, now rather than at the end of the turn.
   */
  send(message: Uint8Array, flushBefore?: boolean, flushAfter?: boolean, notifySent?: boolean): void;
  /**
   * Bytes queued in the transport but not yet handed to the OS: the messages' and, beyond them, at most
   * PIPE_OWN_BYTES of the pipe's own (framing, its control frames). The pipe calls the channel's `drained()`
   * once a message sent with `notifySent` has left (it may for any other message too): the mux asks for it
   * whenever the pipe held bytes already, the message alone comes within PIPE_OWN_BYTES of the high-water mark,
   * or writers wait for room — so while the pipe is congested some message in it always will, and a message
   * into an idle pipe (every unary call's, one at a time) needs no write callback.
   */
  readonly bufferedAmount: number;
  /** Closes the underlying connection. The transport then calls `pipeClosed`. */
  close(reason: AgentError): void;
}

/**
 * What a pipe's `bufferedAmount` may count beyond one message's bytes: its own framing (a WebSocket frame's header
 * and mask key, up to 14 bytes) and control frames of its own (pongs: ws answers a peer's pings by itself, at most
 * 60 waiting of up to 131 bytes each, `MAX_PENDING_PONGS` in @agentlink/ws: 7,860). A message alone in the pipe
 * that comes within this of the high-water mark asks to hear that it left (see `MuxedChannel.notifySent`): the
 * pipe may hold more than the mark with no other message in it.
 */
const PIPE_OWN_BYTES = 8 * 1024;

/** What a {@link MuxedChannel} is built from: the pipe, the peer, the options and the callbacks for accepted streams and refusals. */
export interface MuxedChannelInit extends MuxOptions {
  kind: ChannelKind;
  peer: AgentId;
  remoteAddress: string;
  pipe: MessagePipe;
  /** The dialer opens odd stream ids, the listener even ones, so both can open streams without collisions. */
  role: 'dialer' | 'listener';
  /** Called for each stream the peer opens. */
  onStream(stream: ChannelStream, channel: Channel): void;
  /** Told when the mux refuses the peer something (a stream over the limit, a channel that does not read). */
  onRefused?(refusal: Refusal): void;
  /**
   * Our SETTINGS wait for our first frame instead of going out at once (unless our window is above the initial
   * one): for a mux that may never send, so that its peer keeps no state for it — the reverse stream of an HTTP/2
   * client, which most servers never call back. The peer learns our features only then.
   */
  settingsWithFirstFrame?: boolean;
  /**
   * The largest OPEN or DATA body this side's pipe takes (default and minimum 64 KiB, the protocol's), announced
   * in SETTINGS so a peer with a larger `maxChunk` sends pieces that large here (a WebSocket's `maxPayload` − 5).
   */
  largestBodyTaken?: number;
}

/**
 * A Channel made of one message pipe and a yamux-like multiplexer: many streams with per-stream flow control.
 * A transport with only a pipe (WebSocket, relay) builds one of these and feeds it incoming messages.
 */
export class MuxedChannel implements Channel, MuxStreamHost {
  readonly kind: ChannelKind;
  path?: ChannelPath;
  readonly peer: AgentId;
  readonly remoteAddress: string;
  readonly initiator: 'local' | 'remote';
  readonly closed: Promise<AgentError>;
  /** The largest DATA body sent now: `mux.maxChunk`, capped by what the peer announced it takes (64 KiB until then). */
  maxChunk: number;
  /** Told when the first stream opens and the last one ends (a listener's eviction picks only idle connections). */
  activity: ConnectionActivity | undefined = undefined;

  private readonly pipe: MessagePipe;
  private readonly configuredMaxChunk: number;
  private readonly largestBodyTaken: number;
  private readonly window: number;
  private readonly maxWindow: number;
  private readonly maxWindowGrowth: number;
  /** Bytes the streams' windows grew by, all together (auto-tuning), and the path's RTT as the streams measure it. */
  private windowGrowth = 0;
  private minRttMs: number | undefined;
  /** The peer's receive window: the protocol's initial one until its SETTINGS say more. */
  private peerWindow = INITIAL_WINDOW;
  /** The peer announced frame flags (SETTINGS): FINs may be folded into frames, and callers' FINs left out. */
  frameFlags = false;
  private readonly maxInboundStreams: number;
  private readonly highWaterMark: number;
  private readonly maxUnsentBytes: number;
  private readonly onRefused: MuxedChannelInit['onRefused'];
  private readonly onStream: MuxedChannelInit['onStream'];
  private readonly streams = new Map<number, MuxStream>();
  /** Streams with bytes to send while the pipe is congested, served by priority as it drains. */
  private readonly pipeWaiters = new WeightedPriorityQueue<MuxStream>((s) => s.waitingForPipe);
  private nextId: number;
  private inboundCount = 0;
  private closeReason: AgentError | undefined;
  private goawayReason: AgentError | undefined;
  private resolveClosed!: (reason: AgentError) => void;
  private settingsSent = false;

  constructor(init: MuxedChannelInit) {
    this.kind = init.kind;
    this.peer = init.peer;
    this.remoteAddress = init.remoteAddress;
    this.initiator = init.role === 'dialer' ? 'local' : 'remote';
    this.pipe = init.pipe;
    this.onStream = init.onStream;
    const options = resolveMuxOptions(init);
    this.window = options.window;
    this.maxWindow = options.maxWindow;
    this.maxWindowGrowth = options.maxChannelWindowGrowth;
    this.configuredMaxChunk = options.maxChunk;
    this.maxChunk = Math.min(options.maxChunk, MAX_MUX_BODY);
    this.largestBodyTaken = Math.max(MAX_MUX_BODY, init.largestBodyTaken ?? MAX_MUX_BODY);
    this.maxInboundStreams = options.maxInboundStreams;
    this.highWaterMark = options.highWaterMark;
    this.maxUnsentBytes = options.maxUnsentBytes;
    this.onRefused = init.onRefused;
    this.nextId = init.role === 'dialer' ? 1 : 2;
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    // Our window and features, first thing: the peer's streams can use the window, and the peer learns what
    // frames it may send us before its first stream (a peer from before features reads only the window).
    if (!init.settingsWithFirstFrame || this.window > INITIAL_WINDOW) this.sendSettings();
  }

  /** Every frame of ours goes out here: our SETTINGS first, once (see settingsWithFirstFrame). */
  private send(frame: Uint8Array, flushBefore?: boolean, flushAfter?: boolean): void {
    if (!this.settingsSent) this.sendSettings();
    this.pipe.send(frame, flushBefore, flushAfter, this.notifySent(frame.length));
  }

  /**
   * Whether the pipe must tell us (`drained`) when a message of `bytes` has left. Writers wait only while the
   * pipe holds more than the high-water mark: then it holds either one message that nearly fills the mark by
   * itself (with the pipe's own bytes: PIPE_OWN_BYTES) or several, of which every one after the first was sent
   * into a non-empty pipe — either way one that asked. And nothing is left behind the last one that asked: a
   * message sent while it was still in the pipe asked too. With writers waiting, every message asks, as every
   * one did before this choice.
   */
  private notifySent(bytes: number): boolean {
    return this.pipeWaiters.size > 0 || bytes + PIPE_OWN_BYTES > this.highWaterMark || this.pipe.bufferedAmount > 0;
  }

  private sendSettings(): void {
    this.settingsSent = true;
    const frame = encodeU32Frame(MuxFrameType.settings, featuresTaking(this.largestBodyTaken), this.window);
    this.pipe.send(frame, false, false, this.notifySent(frame.length));
  }

  get isClosed(): boolean {
    return this.closeReason !== undefined;
  }

  get activeStreams(): number {
    return this.streams.size;
  }

  get congested(): boolean {
    return this.pipe.bufferedAmount > this.highWaterMark;
  }

  /** Opens a stream to the peer; rejects once the channel is closed or its stream ids are used up. */
  async openStream(options?: OpenStreamOptions): Promise<ChannelStream> {
    if (this.closeReason) throw this.closeReason;
    if (this.nextId > 0xffff_ffff) throw new AgentError('RESOURCE_EXHAUSTED', 'stream ids exhausted on this channel');
    return this.openStreamNow(options)!;
  }

  /** A stream at once (announced by its first frame); undefined when `openStream` would reject. */
  openStreamNow(options?: OpenStreamOptions): MuxStream | undefined {
    const id = this.nextId;
    if (this.closeReason || id > 0xffff_ffff) return undefined;
    this.nextId += 2;
    // Announced lazily, by its first frame: a call's OPEN and request leave as one message.
    const stream = new MuxStream(id, this, this.window, this.peerWindow, 'local');
    if (options?.priority) stream.priority = options.priority;
    if (options?.firstWriteAtOnce) stream.firstFrameAtOnce = true;
    if (options?.endsWithPeer && this.frameFlags) stream.endsWithPeer = true;
    if (this.streams.size === 0) this.activity?.busy();
    this.streams.set(id, stream);
    return stream;
  }

  async close(reason = new AgentError('CLOSED', 'channel closed')): Promise<void> {
    if (this.closeReason) return;
    // A mux that never sent a frame (settingsWithFirstFrame) is unknown to its peer: nothing to tell it.
    if (this.settingsSent || this.streams.size > 0) this.sendControl(encodeGoaway(closeCodeOf(reason), reason.message));
    this.shutdown(reason);
    this.pipe.close(reason);
  }

  // ---- called by the transport ---------------------------------------------------------------------------

  /** Feeds one message from the pipe. A malformed message closes the channel with PROTOCOL_ERROR. */
  receive(message: Uint8Array): void {
    if (this.closeReason) return;
    if (message.length < MUX_HEADER_BYTES) return this.protocolError('mux frame shorter than its header');
    const flags = message[0]! & MUX_FLAG_BITS;
    const type = message[0]! & ~MUX_FLAG_BITS;
    if (!flagsAllowed(type, flags)) return this.protocolError(`mux frame type ${type} takes no flags (${flags})`);
    const id = readU32(message, 1);
    const body = message.subarray(MUX_HEADER_BYTES);
    switch (type) {
      case MuxFrameType.open:
        return this.acceptStream(id, body, flags);
      case MuxFrameType.data: {
        const stream = this.streams.get(id);
        stream?.onData(body, flags !== 0);
        if (flags !== 0) stream?.onFin();
        return;
      }
      case MuxFrameType.window:
        if (body.length !== 4) return this.protocolError('window frame body must be 4 bytes');
        this.streams.get(id)?.onWindow(readU32(body, 0));
        return;
      case MuxFrameType.fin:
        this.streams.get(id)?.onFin();
        return;
      case MuxFrameType.reset: {
        if (body.length !== 4) return this.protocolError('reset frame body must be 4 bytes');
        const code = errorCodeFromNumber(readU32(body, 0));
        this.streams.get(id)?.fail(new AgentError(code, `stream reset by peer (${code})`, { remote: true }));
        return;
      }
      case MuxFrameType.goaway: {
        if (body.length < 4) return this.protocolError('goaway frame body too short');
        // A retired channel's GOAWAY fails our streams unprocessed: the peer never processed what it did not answer.
        this.goawayReason = peerCloseError(readU32(body, 0), Buffer.from(body.subarray(4)).toString('utf8'));
        return;
      }
      case MuxFrameType.settings:
        if (body.length !== 4) return this.protocolError('settings frame body must be 4 bytes');
        // The id field carries the peer's features (0 from peers before them); unknown bits are for later versions.
        this.frameFlags = (id & MuxFeature.frameFlags) !== 0;
        // Pieces above 64 KiB only to a peer that said it takes them: a WebSocket peer closes on a larger message.
        this.maxChunk = Math.min(this.configuredMaxChunk, largestBodyOf(id));
        return this.peerSettings(readU32(body, 0));
      default:
        return this.protocolError(`unknown mux frame type ${type}`);
    }
  }

  /** The pipe is gone (closed by either side or broken): fail everything still open. */
  pipeClosed(reason: AgentError): void {
    this.shutdown(this.goawayReason ?? reason);
  }

  /**
   * The pipe sent some buffered bytes: wake writers that waited for it, highest priority first, as many as
   * the room below the high-water mark holds (one chunk each), so urgent streams' frames enter the pipe first.
   */
  drained(): void {
    // Called for every message the pipe sent: most find no writer waiting, and need not ask the pipe anything.
    if (this.pipeWaiters.size === 0) return;
    let room = this.highWaterMark - this.pipe.bufferedAmount;
    while (room > 0) {
      const stream = this.pipeWaiters.shift();
      if (!stream) return;
      stream.waitingForPipe = false;
      room -= this.maxChunk;
      stream.wakeWriters();
    }
  }

  // ---- MuxStreamHost -------------------------------------------------------------------------------------

  sendData(id: number, chunk: Uint8Array, open: boolean, second: boolean, flags = 0, atOnce = false): void {
    // Data waits for room below the high-water mark (MuxStream.write): no check of the peer's reading here.
    if (!this.closeReason) this.send(encodeMuxFrame(open ? MuxFrameType.open : MuxFrameType.data, id, chunk, flags), second, atOnce);
  }

  /** Grants the peer `increment` more bytes on stream `id`. */
  sendWindow(id: number, increment: number): void {
    this.sendControl(encodeU32Frame(MuxFrameType.window, id, increment));
  }

  /** Ends our sending side of stream `id`. */
  sendFin(id: number): void {
    this.sendControl(encodeMuxFrame(MuxFrameType.fin, id));
  }

  /** Resets stream `id` with `reason`'s code. */
  sendReset(id: number, reason: AgentError): void {
    this.sendControl(encodeU32Frame(MuxFrameType.reset, id, errorCodeToNumber(reason.code)));
  }

  get rttMs(): number | undefined {
    return this.minRttMs;
  }

  /** The smallest sample is the path's RTT: larger ones include time the sender spent not waiting for our grant. */
  rttSample(ms: number): void {
    if (this.minRttMs === undefined || ms < this.minRttMs) this.minRttMs = ms;
  }

  growWindow(current: number, bytes: number): number {
    const granted = Math.max(0, Math.min(bytes, this.maxWindow - current, this.maxWindowGrowth - this.windowGrowth));
    this.windowGrowth += granted;
    return granted;
  }

  /** The clock the window tuning measures round trips with (milliseconds; tests may replace it). */
  now(): number {
    return performance.now();
  }

  waitForPipe(stream: MuxStream): void {
    if (stream.waitingForPipe) return;
    stream.waitingForPipe = true;
    this.pipeWaiters.push(stream, stream.priority);
  }

  release(id: number): void {
    const stream = this.streams.get(id);
    if (!stream) return;
    this.streams.delete(id);
    this.windowGrowth -= stream.grownBytes;
    if (id % 2 !== this.nextId % 2) this.inboundCount--;
    if (this.streams.size === 0) this.activity?.idle();
  }

  // ---- internals -----------------------------------------------------------------------------------------

  /** A frame that does not wait for room (window, fin, reset, goaway, settings): bounded by the peer's reading. */
  private sendControl(frame: Uint8Array): void {
    if (this.closeReason) return;
    if (this.pipe.bufferedAmount > this.maxUnsentBytes) return this.notReading();
    this.send(frame);
  }

  /** The peer lets our frames pile up unread: stop serving it rather than buffer without bound. */
  private notReading(): void {
    const reason = new AgentError('RESOURCE_EXHAUSTED', `peer does not read: more than ${this.maxUnsentBytes} bytes unsent`);
    this.refuse('not-reading', reason);
    this.shutdown(reason); // no GOAWAY: it would only queue behind what the peer does not read
    this.pipe.close(reason);
  }

  private refuse(reason: string, error: AgentError): void {
    this.onRefused?.({ stage: 'stream', reason, kind: this.kind, remoteAddress: this.remoteAddress, peer: this.peer, code: error.code });
  }

  /** The peer announced its receive window: streams open now get the difference as credit, new ones start with it. */
  private peerSettings(window: number): void {
    if (window < INITIAL_WINDOW) return this.protocolError(`peer announced a window of ${window}, below the initial ${INITIAL_WINDOW}`);
    const raise = window - this.peerWindow;
    this.peerWindow = window;
    if (raise <= 0) return;
    for (const stream of this.streams.values()) stream.onWindow(raise);
  }

  private acceptStream(id: number, firstBytes: Uint8Array, flags: number): void {
    if (id % 2 === this.nextId % 2 || id === 0) return this.protocolError(`peer opened stream ${id} with our parity`);
    if (this.streams.has(id)) return this.protocolError(`peer reopened live stream ${id}`);
    if (this.inboundCount >= this.maxInboundStreams) {
      // A peer past the limit that does not read our refusals either is flooding: it gets no queue of them.
      if (this.congested) return this.notReading();
      this.refuse('max-streams', new AgentError('RESOURCE_EXHAUSTED', 'too many streams'));
      this.sendControl(encodeU32Frame(MuxFrameType.reset, id, errorCodeToNumber('RESOURCE_EXHAUSTED')));
      return;
    }
    const stream = new MuxStream(id, this, this.window, this.peerWindow, 'remote');
    if ((flags & MuxFrameFlag.endsWithPeer) !== 0) stream.endsWithPeer = true;
    if (this.streams.size === 0) this.activity?.busy();
    this.streams.set(id, stream);
    this.inboundCount++;
    const fin = (flags & MuxFrameFlag.fin) !== 0;
    if (firstBytes.length > 0) stream.onData(firstBytes, fin);
    if (fin) stream.onFin();
    this.onStream(stream, this);
  }

  private protocolError(message: string): void {
    void this.close(new AgentError('PROTOCOL_ERROR', message));
  }

  private shutdown(reason: AgentError): void {
    if (this.closeReason) return;
    this.closeReason = reason;
    for (const stream of [...this.streams.values()]) stream.fail(reason);
    this.streams.clear();
    this.resolveClosed(reason);
  }
}
