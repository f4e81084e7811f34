import { WRITTEN } from '../wire/written.js';
import { AgentError } from '../errors.js';
import type { ChannelStream } from '../channel.js';
import { ChunkQueue, type ChunkSink } from '../util/chunk-queue.js';
import type { Priority } from '../wire/messages.js';
import { MuxFrameFlag } from './mux-frame.js';

/** What a stream needs from its multiplexer; keeps MuxStream testable and free of pipe details. */
export interface MuxStreamHost {
  readonly maxChunk: number;
  readonly congested: boolean;
  /**
   * `open` is set on a stream's first frame: the stream is announced together with its first bytes. `second`
   * is set on the second data frame this side sends on the stream: the pipe then sends what it batched before
   * it at once, so a producer that writes a burst without waiting does not hold its first token until the end
   * of its turn, while a unary call's one message still shares a write with its FIN (and with other calls').
   * `atOnce` is set on a stream's first data frame when someone waits for it (MuxStream.firstFrameAtOnce): the
   * pipe sends it now instead of at the end of the turn.
   */
  sendData(id: number, chunk: Uint8Array, open: boolean, second: boolean, flags?: number, atOnce?: boolean): void;
  /** The peer understands frame flags (see MuxFrameFlag): a FIN may be folded into the last data frame. */
  readonly frameFlags: boolean;
  sendWindow(id: number, increment: number): void;
  /** The channel's RTT estimate in ms (see MuxedChannel.rttSample), undefined before the first sample. */
  readonly rttMs: number | undefined;
  rttSample(ms: number): void;
  /** Grants up to `bytes` of growth to a stream's receive window, within the per-stream and per-channel bounds. */
  growWindow(current: number, bytes: number): number;
  now(): number;
  sendFin(id: number): void;
  sendReset(id: number, reason: AgentError): void;
  /** `stream` has bytes to send but the pipe is congested: wake it, by priority, once there is room. */
  waitForPipe(stream: MuxStream): void;
  /** Called once the stream needs no more routing: both sides ended, or it was reset. */
  release(id: number): void;
}

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: AgentError): void;
}

/** Every write the pipe took at once returns this one promise (see wire/written.ts). */
const RESOLVED = WRITTEN;

/**
 * One multiplexed stream with yamux-style credit: the receiver grants bytes as its reader consumes them.
 *
 * The receive window auto-tunes toward the path's bandwidth-delay product (as quic-go and yamux do): a stream
 * whose reader consumed half its window in less than two round trips was held back by the window, not by the
 * path or the reader, so its next grant doubles the window (within the bounds the channel grants). A slow reader
 * never grows it. The round trip needs no new frame: bytes past the limit we had granted cannot arrive before
 * our grant reached the sender and its data came back, so grant-to-first-byte-beyond-the-old-limit is a sample
 * of at least one RTT (exactly one when the sender was waiting for the grant, the case that matters here).
 */
export class MuxStream implements ChannelStream {
  private sendCredit: number;
  private readonly incoming = new ChunkQueue((bytes) => this.consumed(bytes));
  private unackedBytes = 0;
  /** Our receive window now: the configured one, grown while the reader keeps up with the path. */
  private window: number;
  /** Bytes received so far, and the most the peer may have sent (our window plus every grant). */
  private receivedBytes = 0;
  private grantedLimit: number;
  /** The grant whose round trip is being timed: the limit before it, and when it left. */
  private probe: { limit: number; at: number } | undefined;
  /** When the current window's consumption started (the last grant, or the first byte). */
  private epochStart: number | undefined;
  /** Bytes the window grew by: what this stream holds of the channel's growth budget until it is released. */
  private grown = 0;
  private creditWaiters: Waiter<void>[] = [];
  private localEnded = false;
  private remoteEnded = false;
  private failure: AgentError | undefined;
  /** Whether the peer knows this stream: ours are announced by their first frame, the peer's already are. */
  private announced: boolean;
  /** Data frames this side sent on the stream, counted up to 2 (see MuxStreamHost.sendData). */
  private dataFrames = 0;
  /** Order among streams waiting for a congested pipe. */
  priority: Priority = 'normal';
  /** Already in the host's queue for the pipe. */
  waitingForPipe = false;
  /**
   * The stream's first data frame leaves at once, not at the end of its turn, unless it also ends our side (see
   * MuxStreamHost.sendData): someone waits for it while the rest of the turn runs. Set on a stream the peer
   * opened (its first frame of ours is the first item of a streamed reply; a unary reply ends the stream in
   * that frame) and, on one we open, by `OpenStreamOptions.firstWriteAtOnce` (a streamed call's request).
   */
  firstFrameAtOnce: boolean;
  /**
   * The opener sends nothing but an abort after its first frames, so its side ends with the other side's (the
   * OPEN carries MuxFrameFlag.endsWithPeer): a unary call's caller sends no FIN of its own. Set before the
   * first frame on a stream we open (only toward a peer with frame flags), from the OPEN on one the peer opened.
   */
  endsWithPeer = false;

  constructor(
    readonly id: number,
    private readonly host: MuxStreamHost,
    /** Bytes we accept unread: our receive window (it may grow, see above). */
    window: number,
    /** Bytes the peer accepts unread, as far as we know now (its SETTINGS may raise it later). */
    sendWindow: number,
    origin: 'local' | 'remote',
  ) {
    this.window = window;
    this.grantedLimit = window;
    this.sendCredit = sendWindow;
    this.announced = origin === 'remote';
    this.isRemote = origin === 'remote';
    this.firstFrameAtOnce = origin === 'remote';
  }

  /** The peer opened this stream. */
  private readonly isRemote: boolean;

  /** Receive window bytes above the configured one: what this stream holds of the channel's growth budget. */
  get grownBytes(): number {
    return this.grown;
  }

  write(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.localEnded) return Promise.reject(new AgentError('CLOSED', 'write after end'));
    if (chunk.length <= this.sendCredit && chunk.length <= this.host.maxChunk && !this.host.congested) {
      this.sendCredit -= chunk.length;
      this.sendData(chunk);
      return RESOLVED;
    }
    return this.writeInPieces(chunk);
  }

  private async writeInPieces(chunk: Uint8Array): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.sendCredit === 0 || this.host.congested) {
        if (this.sendCredit > 0) this.host.waitForPipe(this);
        await this.waitForCredit();
      }
      if (this.failure) throw this.failure;
      if (this.sendCredit === 0 || this.host.congested) continue;
      const size = Math.min(this.sendCredit, this.host.maxChunk, chunk.length - offset);
      this.sendCredit -= size;
      this.sendData(chunk.subarray(offset, offset + size));
      offset += size;
    }
  }

  private waitForCredit(): Promise<void> {
    return new Promise((resolve, reject) => this.creditWaiters.push({ resolve, reject }));
  }

  end(): Promise<void> {
    // Nothing sent yet, to a peer that reads flags: OPEN and FIN in one frame. Not through a congested pipe, where
    // endWith would fall back to a write of nothing and an end, and so back here without ever yielding.
    if (!this.announced && this.host.frameFlags && !this.host.congested && !this.failure && !this.localEnded) {
      return this.endWith(new Uint8Array(0));
    }
    return this.endWithFin();
  }

  /** Ends our side with a FIN frame of its own (announcing the stream first if nothing was sent on it). */
  private endWithFin(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.localEnded) return RESOLVED;
    this.localEnded = true;
    if (!this.announced) this.sendData(new Uint8Array(0));
    this.host.sendFin(this.id);
    this.localEndDone();
    return RESOLVED;
  }

  /**
   * Writes `chunk` and ends our side: one frame with the FIN flag when the peer understands it and the chunk
   * fits the credit, one frame, and the pipe's room; otherwise a write and then a FIN, as `write` and `end` do.
   */
  endWith(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.localEnded) return Promise.reject(new AgentError('CLOSED', 'write after end'));
    if (!this.host.frameFlags || chunk.length > this.sendCredit || chunk.length > this.host.maxChunk || this.host.congested) {
      return this.write(chunk).then(() => this.endWithFin());
    }
    this.sendCredit -= chunk.length;
    this.localEnded = true;
    this.sendData(chunk, MuxFrameFlag.fin);
    this.localEndDone();
    return RESOLVED;
  }

  /** Our side ended: a stream whose opener ends with us (endsWithPeer) is then over on both sides. */
  private localEndDone(): void {
    if (this.endsWithPeer && this.isRemote && !this.remoteEnded) {
      this.remoteEnded = true;
      this.incoming.end();
    }
    this.releaseIfDone();
  }

  read(): Promise<Uint8Array | undefined> {
    return this.incoming.read();
  }

  readNow(): Uint8Array | undefined {
    return this.incoming.readNow();
  }

  listen(sink: ChunkSink): void {
    this.incoming.listen(sink);
  }

  reset(reason: AgentError): void {
    if (this.failure || (this.localEnded && this.remoteEnded)) return;
    if (this.announced) this.host.sendReset(this.id, reason); // an unannounced stream is unknown to the peer
    this.fail(reason);
  }

  // ---- called by the multiplexer -------------------------------------------------------------------------

  /** `last`: the frame also ends the peer's side (its FIN flag; `onFin` follows at once). */
  onData(chunk: Uint8Array, last = false): void {
    if (this.failure || this.remoteEnded) return;
    if (this.incoming.queuedBytes + this.unackedBytes + chunk.length > this.window) {
      this.reset(new AgentError('PROTOCOL_ERROR', 'peer exceeded the stream flow-control window'));
      return;
    }
    this.receivedBytes += chunk.length;
    // The clock times window epochs, and no window is granted after the peer's last frame (`consumed`): a unary
    // call's request and response (each one frame with FIN) read no clock (performance.now ~1 µs in a profile).
    if (this.epochStart === undefined && !last) this.epochStart = this.host.now();
    if (this.probe && this.receivedBytes > this.probe.limit) {
      this.host.rttSample(this.host.now() - this.probe.at);
      this.probe = undefined;
    }
    if (last) return this.remoteEnd(chunk);
    this.incoming.push(chunk);
  }

  onWindow(increment: number): void {
    if (this.failure) return;
    this.sendCredit += increment;
    this.wakeWriters();
  }

  onFin(): void {
    if (this.failure || this.remoteEnded) return;
    this.remoteEnd(undefined);
  }

  /**
   * The peer ended its side, with `lastChunk` when the FIN came folded into its last data frame. Both ends are
   * settled before the chunk is queued: a push-style reader (`listen`) handed it may end or reset the stream in
   * that callback, and must find our side already ended with the peer's (else it would send a FIN of its own).
   */
  private remoteEnd(lastChunk: Uint8Array | undefined): void {
    this.remoteEnded = true;
    if (this.endsWithPeer && !this.isRemote && !this.localEnded) {
      // Our side ends with the peer's (we said so on OPEN): no FIN of ours. A write still waiting for credit
      // can never be read now.
      this.localEnded = true;
      if (this.creditWaiters.length > 0) this.rejectWriters(new AgentError('CLOSED', 'the peer ended the stream'));
    }
    if (lastChunk) this.incoming.push(lastChunk);
    this.incoming.end();
    this.releaseIfDone();
  }

  /** The peer reset the stream, or the channel closed under it. */
  fail(reason: AgentError): void {
    if (this.failure) return;
    this.failure = reason;
    this.waitingForPipe = false;
    this.incoming.fail(reason);
    this.rejectWriters(reason);
    this.host.release(this.id);
  }

  private rejectWriters(reason: AgentError): void {
    const waiters = this.creditWaiters;
    this.creditWaiters = [];
    for (const waiter of waiters) waiter.reject(reason);
  }

  setPriority(priority: Priority): void {
    this.priority = priority;
  }

  /** Credit arrived or the pipe has room: writers continue (or queue for the pipe if it is still congested). */
  wakeWriters(): void {
    if (this.creditWaiters.length === 0 || this.sendCredit === 0) return;
    if (this.host.congested) return this.host.waitForPipe(this);
    const waiters = this.creditWaiters;
    this.creditWaiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  private sendData(chunk: Uint8Array, fin = 0): void {
    const flags = !this.announced && this.endsWithPeer ? fin | MuxFrameFlag.endsWithPeer : fin;
    const atOnce = this.dataFrames === 0 && this.firstFrameAtOnce && fin === 0;
    this.host.sendData(this.id, chunk, !this.announced, this.dataFrames === 1, flags, atOnce);
    this.announced = true;
    if (this.dataFrames < 2) this.dataFrames++;
  }

  /**
   * Bytes the reader took: once half a window is consumed, grant it back to the peer — and grow the window first
   * when that half took less than two round trips (the window, not the path or the reader, was the limit).
   */
  private consumed(bytes: number): void {
    this.unackedBytes += bytes;
    if (this.remoteEnded || this.unackedBytes < this.window / 2) return;
    const now = this.host.now();
    let increment = this.unackedBytes;
    const rtt = this.host.rttMs;
    if (rtt !== undefined && this.epochStart !== undefined && now - this.epochStart < 2 * rtt) {
      const growth = this.host.growWindow(this.window, this.window);
      this.window += growth;
      this.grown += growth;
      increment += growth;
    }
    this.epochStart = now;
    this.probe ??= { limit: this.grantedLimit, at: now };
    this.grantedLimit += increment;
    this.host.sendWindow(this.id, increment);
    this.unackedBytes = 0;
  }

  private releaseIfDone(): void {
    if (this.localEnded && this.remoteEnded) this.host.release(this.id);
  }
}
