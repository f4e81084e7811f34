import { AgentError, errorCodeToNumber, type ChannelStream } from '@agentlink/core';
import { fromNative } from './native-errors.js';
import type { NativeStream } from './native.js';

const RESOLVED = Promise.resolve();
/** Bytes asked for per read: large enough that bulk transfers are not dominated by per-read costs. */
const READ_SIZE = 1024 * 1024;

/** A QUIC stream as a ChannelStream: one agentlink call per stream, no mux on top. */
export class QuicChannelStream implements ChannelStream {
  private localReset: AgentError | undefined;
  private localEnded = false;
  private remoteEnded = false;
  private released = false;

  /** `onDone` runs once, when both sides ended or the stream failed: the channel's stream count. */
  constructor(
    private readonly native: NativeStream,
    private readonly onDone: () => void,
  ) {}

  write(chunk: Uint8Array): Promise<void> {
    if (this.localReset) return Promise.reject(this.localReset);
    let data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    try {
      // Fast path: quinn takes what fits in the window synchronously; only the rest waits for credit.
      const taken = this.native.tryWrite(data);
      if (taken === data.length) return RESOLVED;
      data = data.subarray(taken);
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.write(data).catch((error: unknown) => Promise.reject(this.fail(error)));
  }

  end(): Promise<void> {
    if (this.localReset) return Promise.reject(this.localReset);
    return this.native.finish().then(
      () => {
        this.localEnded = true;
        if (this.remoteEnded) this.release();
      },
      (error: unknown) => Promise.reject(this.fail(error)),
    );
  }

  read(): Promise<Uint8Array | undefined> {
    if (this.localReset) return Promise.reject(this.localReset);
    try {
      const ready = this.native.tryRead(READ_SIZE);
      if (ready) return Promise.resolve(ready);
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
    return this.native.read(READ_SIZE).then(
      (data) => {
        if (data) return data;
        this.remoteEnded = true;
        if (this.localEnded) this.release();
        return undefined;
      },
      (error: unknown) => Promise.reject(this.fail(error)),
    );
  }

  reset(reason: AgentError): void {
    if (this.localReset) return;
    this.localReset = reason;
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
