import { constants, type Http2Stream, type ServerHttp2Stream } from 'node:http2';
import { AgentError, ChunkQueue, type ChannelStream } from '@agentlink/core';
import { fromHttp2Code, toHttp2Code } from './reset-codes.js';

const RESOLVED = Promise.resolve();
const ignoreError = (): void => undefined;
/** Received bytes held before the stream is paused; pausing stops WINDOW_UPDATEs, which stops the sender. */
const READ_BUFFER_LIMIT = 1024 * 1024;

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: AgentError): void;
}

/** An HTTP/2 stream (one request and its response, full duplex) as a ChannelStream. */
export class Http2ChannelStream implements ChannelStream {
  /** Paused above READ_BUFFER_LIMIT (no WINDOW_UPDATEs then: the sender waits), resumed below half of it. */
  private readonly incoming = new ChunkQueue(() => {
    if (this.stream.isPaused() && this.incoming.queuedBytes < READ_BUFFER_LIMIT / 2) this.stream.resume();
  });
  /** node emitted 'end'; the queue is ended one turn later, unless a reset follows (see onEnd). */
  private endSeen = false;
  /** Whether any byte came back: a stream refused before that was never processed by the peer. */
  private received = false;
  private failure: AgentError | undefined;
  private drainWaiters: Waiter<void>[] = [];
  /** A server stream sends its response HEADERS with its first bytes (set by the channel). */
  beforeFirstWrite: (() => void) | undefined;

  constructor(
    private readonly stream: Http2Stream,
    /** The reason a stream ended without its own: the session's close or GOAWAY reason. */
    private readonly sessionFailure: () => AgentError,
    onDone: () => void,
  ) {
    // Few listeners, and none left on node's stream once it closed ('drain' only while a write waits; a peer's
    // RST_STREAM read from rstCode at 'close'; once() for 'end'/'close'; 'data' removed at 'close'; a shared
    // no-op for 'error'). Node keeps its stream object a while after close, and whatever it still referenced
    // survived young-generation collections: an HTTP/2 server promoted 1.15 MB per scavenge with plain
    // listeners, 0.42 MB like this.
    stream.on('data', this.onData);
    stream.once('end', () => this.onEnd());
    stream.on('error', ignoreError); // 'close' follows with the code
    stream.once('close', () => {
      if (stream.rstCode !== undefined && stream.rstCode !== 0) {
        this.failFromPeer(stream.rstCode);
      } else if (this.endSeen) {
        this.onEndConfirmed(); // closed cleanly: the end was real
      } else if (!this.failure) {
        this.fail(this.sessionFailure());
      }
      this.wakeWriters();
      stream.off('data', this.onData);
      onDone();
    });
  }

  write(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.stream.destroyed || this.stream.writableEnded) return Promise.reject(new AgentError('CLOSED', 'write after end'));
    this.respondOnce();
    if (this.stream.write(chunk)) return RESOLVED;
    if (this.drainWaiters.length === 0) this.stream.once('drain', this.wakeWriters);
    return new Promise((resolve, reject) => this.drainWaiters.push({ resolve, reject }));
  }

  end(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    this.respondOnce();
    if (!this.stream.writableEnded) this.stream.end();
    return RESOLVED;
  }

  read(): Promise<Uint8Array | undefined> {
    return this.incoming.read();
  }

  reset(reason: AgentError): void {
    if (this.failure || this.stream.closed) return;
    this.fail(reason);
    this.stream.close(toHttp2Code(reason.code));
  }

  private respondOnce(): void {
    const respond = this.beforeFirstWrite;
    if (!respond) return;
    this.beforeFirstWrite = undefined;
    if (!(this.stream as ServerHttp2Stream).headersSent && !this.stream.destroyed) respond();
  }

  private readonly onData = (chunk: Buffer): void => {
    this.received = true;
    this.incoming.push(chunk);
    if (this.incoming.queuedBytes >= READ_BUFFER_LIMIT) this.stream.pause();
  };

  private onEnd(): void {
    this.endSeen = true;
    // node ends the readable side before it reports a peer's RST_STREAM ('aborted' follows in the same turn):
    // wait one turn, so a reset is never mistaken for a clean end.
    setImmediate(() => this.onEndConfirmed());
  }

  private onEndConfirmed(): void {
    if (this.incoming.closed) return;
    const code = this.stream.rstCode;
    if (code !== undefined && code !== 0) return this.failFromPeer(code);
    this.incoming.end();
  }

  private failFromPeer(code: number): void {
    const errorCode = fromHttp2Code(code);
    const why = code === constants.NGHTTP2_CANCEL ? 'the HTTP/2 session ended under the stream' : `stream reset by peer (${errorCode})`;
    // Node servers refuse streams over their limit at HEADERS time (REFUSED_STREAM or ENHANCE_YOUR_CALM),
    // before any handler saw them.
    const refused = code === constants.NGHTTP2_REFUSED_STREAM || code === constants.NGHTTP2_ENHANCE_YOUR_CALM;
    this.fail(new AgentError(refused ? 'UNAVAILABLE' : errorCode, why, { remote: true, unprocessed: refused && !this.received }));
  }

  private fail(reason: AgentError): void {
    if (this.failure) return;
    this.failure = reason;
    this.incoming.fail(reason);
    const writers = this.drainWaiters;
    this.drainWaiters = [];
    for (const writer of writers) writer.reject(reason);
  }

  private readonly wakeWriters = (): void => {
    const writers = this.drainWaiters;
    this.drainWaiters = [];
    for (const writer of writers) {
      if (this.failure) writer.reject(this.failure);
      else writer.resolve();
    }
  };
}
