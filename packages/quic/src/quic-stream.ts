import { AgentError, type Priority } from '@agentlink/core';
import { errorCodeFromNumber, errorCodeToNumber, WRITTEN, type ChannelStream } from '@agentlink/core/transport';
import { fromNative } from './native-errors.js';
import type { NativeReadEvent, NativeStream } from './native.js';
import type { PushReader, PushReads } from './push-reads.js';

/** QUIC's own stream priority for agentlink's four levels (higher is sent first). */
const QUIC_PRIORITY: Record<Priority, number> = { critical: 3, high: 2, normal: 1, low: 0 };
/** Bytes asked for per read: large enough that bulk transfers are not dominated by per-read costs. */
const READ_SIZE = 1024 * 1024;
/** Writes below this size written in the same tick are batched into one call into the engine. */
const CORK_LIMIT = 16 * 1024;

/** The caller of a unary call that ended its side with its request gave up: its code, as STOP_SENDING carries no text. */
function callerStopped(code: number): AgentError {
  const name = errorCodeFromNumber(code);
  return new AgentError(name, `the caller stopped the call (${name})`, { remote: true });
}

/** A QUIC stream as a ChannelStream: one agentlink call per stream, no mux on top. */
export class QuicChannelStream implements ChannelStream, PushReader {
  private localReset: AgentError | undefined;
  private localEnded = false;
  private remoteEnded = false;
  private released = false;
  /** Small writes of this tick, sent together at its end (tokens: one engine call per burst, not per token). */
  private corked: Buffer[] = [];
  private corkedBytes = 0;
  private flushScheduled = false;
  /** The stream's first write (a call's request, a reply's first token) is never corked: see `write`. */
  private wroteAny = false;
  /** A flush waiting for flow-control credit: later writes queue behind it, in order. */
  private blocked: Promise<void> | undefined;
  private writeFailure: AgentError | undefined;

  /** `readNow` met the peer's end, or a failure: the next `read` reports it (the engine reports either once). */
  private endTaken = false;
  private readNowFailure: { error: unknown } | undefined;

  /** The read waiting in the engine, if any: a write the peer stopped fails only after it (see `writeFailed`). */
  private pendingRead: Promise<unknown> | undefined;
  /** The armed push read's settlers (see `onRead`). */
  private readSettlers: { resolve: (data: Uint8Array | undefined) => void; reject: (error: unknown) => void } | undefined;
  private readonly token: number;

  /** The read after the peer's end that waits for its STOP_SENDING or our end (see `afterPeerEnd`). */
  private stopWait: { resolve: (data: undefined) => void; reject: (error: unknown) => void } | undefined;

  /**
   * `onDone` runs once, when both sides ended or the stream failed (with the failure): the channel's stream count. `opened`: we
   * opened it (we are the caller), so a reset may end it gracefully (see `reset`). `endsWithRequest` (a stream we
   * open, on agentlink/2) and `peerEndsWithRequest` (one the peer opened there): see ChannelStream.
   */
  constructor(
    private readonly native: NativeStream,
    private readonly onDone: (failure?: AgentError) => void,
    private readonly opened = false,
    private readonly reads?: PushReads,
    readonly endsWithRequest = false,
    readonly peerEndsWithRequest = false,
  ) {
    this.token = reads?.token() ?? 0;
  }

  /** Maps onto quinn's send priority: a critical stream's data leaves before a low one's on this connection. */
  setPriority(priority: Priority): void {
    if (!this.released) this.native.setPriority(QUIC_PRIORITY[priority]);
  }

  write(chunk: Uint8Array): Promise<void> {
    const failure = this.localReset ?? this.writeFailure;
    if (failure) return Promise.reject(failure);
    if (this.blocked) return this.blocked.then(() => this.write(chunk));
    const data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (data.length < CORK_LIMIT) {
      this.corked.push(data);
      this.corkedBytes += data.length;
      // Time to first token: a producer that writes a burst without waiting would otherwise hold its first
      // token until the end of its turn (or 16 KiB later). Later small writes of the turn are corked. Sent by
      // `flush`, so a write that waits for credit holds the ones after it (order).
      if (!this.wroteAny || this.corkedBytes >= CORK_LIMIT) {
        this.wroteAny = true;
        return this.flush();
      }
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        process.nextTick(this.flushAtEndOfTick);
      }
      return WRITTEN;
    }
    if (this.corked.length > 0) {
      const flushed = this.flush();
      if (flushed !== WRITTEN) return flushed.then(() => this.write(chunk));
    }
    return this.holdUntilSent(this.send(data));
  }

  private readonly flushAtEndOfTick = (): void => {
    this.flushScheduled = false;
    if (this.corked.length > 0 && !this.localReset) this.flush().catch(() => undefined);
  };

  /** Sends what is corked; a failure here is reported by the next write, end or read. */
  private flush(): Promise<void> {
    const data = this.corked.length === 1 ? this.corked[0]! : Buffer.concat(this.corked, this.corkedBytes);
    this.corked = [];
    this.corkedBytes = 0;
    return this.holdUntilSent(this.send(data));
  }

  /**
   * A send the engine did not take whole holds every write after it until its rest is out: the engine's wait for
   * credit runs on its own thread, and a later `tryWrite` could take credit that arrives meanwhile, ahead of that
   * rest (test/write-order.test.ts), whether or not the caller awaited the first write.
   */
  private holdUntilSent(sent: Promise<void>): Promise<void> {
    if (sent === WRITTEN) return sent;
    const blocked: Promise<void> = sent.then(
      () => {
        if (this.blocked === blocked) this.blocked = undefined;
      },
      (error: unknown) => {
        this.writeFailure ??= fromNative(error, this.localReset);
        if (this.blocked === blocked) this.blocked = undefined;
        throw this.writeFailure;
      },
    );
    this.blocked = blocked;
    return blocked;
  }

  /** Fast path: quinn takes what fits in the window synchronously; only the rest waits for credit. */
  private send(data: Buffer): Promise<void> {
    try {
      const taken = this.native.tryWrite(data);
      if (taken === data.length) return WRITTEN;
      data = data.subarray(taken);
    } catch (error) {
      return this.writeFailed(error);
    }
    return this.native.write(data).catch((error: unknown) => this.writeFailed(error));
  }

  /**
   * A caller that gives up writes a cancel message with its reason, finishes its side after it and stops ours
   * (see `reset`). QUIC delivers the stop and the message independently, so the stop may fail our write
   * before our reader has the message: a write failed by the peer waits for the read in progress to settle
   * (and one turn of the event loop, for what the reader does with it) before it fails, and the reason the
   * peer gave arrives first. Bounded: a peer that stops our side has finished or reset its own.
   */
  private writeFailed(error: unknown): Promise<never> {
    const failure = fromNative(error, this.localReset);
    const reading = this.pendingRead;
    if (!failure.remote || !reading) return Promise.reject(this.fail(error));
    const afterRead = (): Promise<never> =>
      new Promise<never>((_, reject) => setImmediate(() => reject(this.fail(error))));
    return reading.then(afterRead, afterRead);
  }

  end(): Promise<void> {
    if (this.localEnded) return WRITTEN; // ended with the request (endsWithRequest): core's end after the reply
    const failure = this.localReset ?? this.writeFailure;
    if (failure) return Promise.reject(failure);
    if (this.blocked) return this.blocked.then(() => this.end());
    if (this.corked.length > 0) {
      const flushed = this.flush();
      if (flushed !== WRITTEN) return flushed.then(() => this.end());
    }
    try {
      if (this.native.tryFinish()) {
        this.ended();
        return WRITTEN;
      }
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.finish().then(
      () => this.ended(),
      (error: unknown) => Promise.reject(this.fail(error)),
    );
  }

  /**
   * The reply's last write and our end in the same turn (no promise hop between them), so the engine has the
   * FIN before it builds the packet more often: one packet carries the reply and its end.
   */
  endWith(chunk: Uint8Array): Promise<void> {
    // A unary request or reply: nothing before it pending, so the write and the end are one engine call.
    if (!this.wroteAny && !this.localReset && !this.writeFailure && !this.blocked && this.corked.length === 0) {
      this.wroteAny = true;
      const data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let taken: number;
      try {
        taken = this.native.tryWriteFinish(data);
      } catch (error) {
        return this.writeFailed(error);
      }
      if (taken === data.length) {
        this.ended();
        return WRITTEN;
      }
      const rest = this.holdUntilSent(this.send(data.subarray(taken)));
      return rest === WRITTEN ? this.end() : rest.then(() => this.end());
    }
    const written = this.write(chunk);
    return written === WRITTEN ? this.end() : written.then(() => this.end());
  }

  /** Bytes the engine holds now, in one crossing; the end and failures are left for `read`. */
  readNow(): Uint8Array | undefined {
    if (this.localReset || this.endTaken || this.readNowFailure || this.pendingRead) return undefined;
    let ready: Buffer | null;
    try {
      ready = this.native.tryRead(READ_SIZE);
    } catch (error) {
      this.readNowFailure = { error };
      return undefined;
    }
    if (ready === null) return undefined;
    if (ready.length === 0) {
      this.endTaken = true;
      return undefined;
    }
    return ready;
  }

  read(): Promise<Uint8Array | undefined> {
    if (this.localReset) return Promise.reject(this.localReset);
    if (this.remoteEnded && this.peerEndsWithRequest) return this.afterPeerEnd();
    if (this.endTaken) {
      this.endTaken = false;
      return Promise.resolve(this.remoteEnd());
    }
    if (this.readNowFailure) return Promise.reject(this.fail(this.readNowFailure.error));
    // With push reads, what is here and else the armed read are one crossing (`readOrArm`), not two.
    let ready: Buffer | boolean | null;
    try {
      ready = this.reads?.running ? this.reads.readOrArm(this.native, this.token, this, READ_SIZE) : this.native.tryRead(READ_SIZE);
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    if (ready === true) {
      const armed = new Promise<Uint8Array | undefined>((resolve, reject) => {
        this.readSettlers = { resolve, reject };
      });
      this.pendingRead = armed;
      return armed;
    }
    if (ready) return Promise.resolve(ready.length > 0 ? ready : this.remoteEnd());
    const reading = this.native.read(READ_SIZE).then(
      (data) => data ?? this.remoteEnd(),
      (error: unknown) => Promise.reject(this.fail(error)),
    );
    this.pendingRead = reading;
    const settled = (): void => {
      if (this.pendingRead === reading) this.pendingRead = undefined;
    };
    reading.then(settled, settled);
    return reading;
  }

  /** The armed push read finished (called from the connection's batch; never throws). */
  onRead(event: NativeReadEvent): void {
    const settlers = this.readSettlers;
    this.readSettlers = undefined;
    this.pendingRead = undefined;
    if (!settlers) return;
    if (event.error != null) {
      settlers.reject(this.fail(new Error(event.error)));
      return;
    }
    if (event.data) {
      // The end came with the bytes: the next `read` reports it without asking the engine.
      if (event.fin) this.endTaken = true;
      settlers.resolve(event.data);
      return;
    }
    settlers.resolve(this.remoteEnd());
  }

  /**
   * A read after the peer's end, on a stream whose opener ends its side with its request (agentlink/2): the
   * opener gives up by stopping our side, which fails this read with its code (the engine's `stopped`, so a
   * handler that is not writing learns it at once), as does the connection's loss; it resolves once our side ended. One engine wait per
   * stream at most, ended by our end, a reset or the stream's release (docs/security.md).
   */
  private afterPeerEnd(): Promise<undefined> {
    if (this.localEnded || this.released) return Promise.resolve(undefined);
    if (this.stopWait) return Promise.reject(new AgentError('INVALID_ARGUMENT', 'one read at a time'));
    const waiting = new Promise<undefined>((resolve, reject) => {
      this.stopWait = { resolve, reject };
    });
    this.native.stopped().then(
      (code) => {
        const settlers = this.stopWait;
        if (!settlers) return;
        this.stopWait = undefined;
        if (code === null) settlers.resolve(undefined);
        else settlers.reject(this.fail(callerStopped(code)));
      },
      (error: unknown) => {
        // The connection is gone (the engine's `stopped` fails as a read does): the caller with it, a cancel.
        const settlers = this.stopWait;
        if (!settlers) return;
        this.stopWait = undefined;
        settlers.reject(this.fail(error));
      },
    );
    return waiting;
  }

  /** Settles the read waiting after the peer's end: our side ended (undefined) or the stream failed. */
  private settleStopWait(failure?: AgentError): void {
    const settlers = this.stopWait;
    if (!settlers) return;
    this.stopWait = undefined;
    if (failure) settlers.reject(failure);
    else settlers.resolve(undefined);
  }

  private ended(): void {
    this.localEnded = true;
    this.settleStopWait();
    if (this.remoteEnded) this.release();
  }

  private remoteEnd(): undefined {
    this.remoteEnded = true;
    if (this.localEnded) this.release();
    return undefined;
  }

  /**
   * Aborts the stream with `reason`'s code. On a stream we opened, what was written this tick (the caller's
   * cancel message, which carries the reason's text) is sent and our side finished after it, and the peer's
   * side is stopped with the code: RESET_STREAM would let the peer discard that message unread. Otherwise —
   * nothing pending, a write waiting for credit (a frame may be half sent), or a stream the peer opened — it
   * is RESET_STREAM + STOP_SENDING. Our own reads and writes fail at once either way.
   */
  reset(reason: AgentError): void {
    if (this.localReset) return;
    this.localReset = reason;
    const code = errorCodeToNumber(reason.code);
    const pending = this.corked.length > 0 && !this.blocked && !this.released ? this.takeCorked() : undefined;
    this.corked = [];
    this.corkedBytes = 0;
    if (!(pending && this.opened && this.sendWhole(pending) && this.native.cancel(code))) this.native.reset(code);
    this.settleStopWait(reason);
    this.release();
  }

  private takeCorked(): Buffer {
    return this.corked.length === 1 ? this.corked[0]! : Buffer.concat(this.corked, this.corkedBytes);
  }

  /** Hands `data` to the engine now, all of it or nothing usable (a part would be a torn frame). */
  private sendWhole(data: Buffer): boolean {
    try {
      return this.native.tryWrite(data) === data.length;
    } catch {
      return false;
    }
  }

  private fail(error: unknown): AgentError {
    const failure = fromNative(error, this.localReset);
    this.release(failure);
    return failure;
  }

  private release(failure?: AgentError): void {
    if (this.released) return;
    this.released = true;
    this.settleStopWait(failure);
    try {
      this.native.release();
    } finally {
      this.onDone(failure); // the channel's count of open streams must come down whatever the engine said
    }
  }
}
