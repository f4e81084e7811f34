import { AgentError, errorCodeToNumber, type ChannelStream, type Priority } from '@agentlink/core';
import { fromNative } from './native-errors.js';
import type { NativeStream } from './native.js';

const RESOLVED = Promise.resolve();
/** QUIC's own stream priority for agentlink's four levels (higher is sent first). */
const QUIC_PRIORITY: Record<Priority, number> = { critical: 3, high: 2, normal: 1, low: 0 };
/** Bytes asked for per read: large enough that bulk transfers are not dominated by per-read costs. */
const READ_SIZE = 1024 * 1024;
/** Writes below this size written in the same tick are batched into one call into the engine. */
const CORK_LIMIT = 16 * 1024;

/** A QUIC stream as a ChannelStream: one agentlink call per stream, no mux on top. */
export class QuicChannelStream implements ChannelStream {
  private localReset: AgentError | undefined;
  private localEnded = false;
  private remoteEnded = false;
  private released = false;
  /** Small writes of this tick, sent together at its end (tokens: one engine call per burst, not per token). */
  private corked: Buffer[] = [];
  private corkedBytes = 0;
  private flushScheduled = false;
  /** A flush waiting for flow-control credit: later writes queue behind it, in order. */
  private blocked: Promise<void> | undefined;
  private writeFailure: AgentError | undefined;

  /** `onDone` runs once, when both sides ended or the stream failed: the channel's stream count. */
  constructor(
    private readonly native: NativeStream,
    private readonly onDone: () => void,
  ) {}

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
      if (this.corkedBytes >= CORK_LIMIT) return this.flush();
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        process.nextTick(this.flushAtEndOfTick);
      }
      return RESOLVED;
    }
    if (this.corked.length > 0) {
      const flushed = this.flush();
      if (flushed !== RESOLVED) return flushed.then(() => this.send(data));
    }
    return this.send(data);
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
    const sent = this.send(data);
    if (sent === RESOLVED) return sent;
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
      if (taken === data.length) return RESOLVED;
      data = data.subarray(taken);
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.write(data).catch((error: unknown) => Promise.reject(this.fail(error)));
  }

  end(): Promise<void> {
    const failure = this.localReset ?? this.writeFailure;
    if (failure) return Promise.reject(failure);
    if (this.blocked) return this.blocked.then(() => this.end());
    if (this.corked.length > 0) {
      const flushed = this.flush();
      if (flushed !== RESOLVED) return flushed.then(() => this.end());
    }
    try {
      if (this.native.tryFinish()) {
        this.ended();
        return RESOLVED;
      }
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.finish().then(
      () => this.ended(),
      (error: unknown) => Promise.reject(this.fail(error)),
    );
  }

  read(): Promise<Uint8Array | undefined> {
    if (this.localReset) return Promise.reject(this.localReset);
    try {
      const ready = this.native.tryRead(READ_SIZE);
      if (ready) return Promise.resolve(ready.length > 0 ? ready : this.remoteEnd());
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.read(READ_SIZE).then(
      (data) => data ?? this.remoteEnd(),
      (error: unknown) => Promise.reject(this.fail(error)),
    );
  }

  private ended(): void {
    this.localEnded = true;
    if (this.remoteEnded) this.release();
  }

  private remoteEnd(): undefined {
    this.remoteEnded = true;
    if (this.localEnded) this.release();
    return undefined;
  }

  reset(reason: AgentError): void {
    if (this.localReset) return;
    this.localReset = reason;
    this.corked = [];
    this.corkedBytes = 0;
    this.native.reset(errorCodeToNumber(reason.code));
    this.release();
  }

  private fail(error: unknown): AgentError {
    this.release();
    return fromNative(error, this.localReset);
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.native.release();
    this.onDone();
  }
}
