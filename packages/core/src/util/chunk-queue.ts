import { AgentError } from '../errors.js';

/**
 * A push-style reader (ChannelStream.listen): handed each chunk, then the end or the failure, in the transport's
 * callback that brought them, with no promise per chunk.
 */
export interface ChunkSink {
  /** The next chunk, in arrival order; it is consumed (its bytes count as read) when handed over. */
  onChunk(chunk: Uint8Array): void;
  /** The peer ended its side after the chunks handed over. */
  onEnd(): void;
  /** Reset or channel loss; nothing follows. */
  onError(error: AgentError): void;
}

/**
 * The read side every byte-stream channel needs: chunks in arrival order, one reader at a time, a clean end, and
 * a failure that wins over anything still queued (a reset discards unread data). `onConsumed` tells the owner
 * when bytes left the queue, which is where flow control grants credit or resumes a paused source.
 */
export class ChunkQueue {
  private readonly chunks: Uint8Array[] = [];
  private queued = 0;
  private ended = false;
  private failure: AgentError | undefined;
  private reader: { resolve(chunk: Uint8Array | undefined): void; reject(error: AgentError): void } | undefined;
  /** The push-style reader, once `listen` made one: it takes every chunk from then on, instead of `read`. */
  private sink: ChunkSink | undefined;

  constructor(private readonly onConsumed: (bytes: number) => void = () => undefined) {}

  /** Bytes received but not read yet. */
  get queuedBytes(): number {
    return this.queued;
  }

  /** True once the queue takes no more data: ended by the peer or failed. */
  get closed(): boolean {
    return this.ended || this.failure !== undefined;
  }

  /** Adds a chunk that arrived; a reader waiting gets it at once. */
  push(chunk: Uint8Array): void {
    if (this.closed) return;
    const { sink } = this;
    if (sink) {
      this.onConsumed(chunk.length);
      sink.onChunk(chunk);
      return;
    }
    const reader = this.reader;
    if (reader) {
      this.reader = undefined;
      this.onConsumed(chunk.length);
      reader.resolve(chunk);
      return;
    }
    this.chunks.push(chunk);
    this.queued += chunk.length;
  }

  /** The sender finished: readers get the queued chunks, then undefined. */
  end(): void {
    if (this.closed) return;
    this.ended = true;
    const { sink } = this;
    if (sink) {
      this.sink = undefined;
      sink.onEnd();
      return;
    }
    const reader = this.reader;
    if (reader && this.chunks.length === 0) {
      this.reader = undefined;
      reader.resolve(undefined);
    }
  }

  /** Reset or channel loss: unread data is dropped and every read from now on rejects with `reason`. */
  fail(reason: AgentError): void {
    if (this.failure) return;
    this.failure = reason;
    this.chunks.length = 0;
    this.queued = 0;
    const reader = this.reader;
    this.reader = undefined;
    reader?.reject(reason);
    const { sink } = this;
    this.sink = undefined;
    sink?.onError(reason);
  }

  /**
   * Push-style reading: the chunks queued now and every later one go to `sink` (in the caller of `push`), then
   * the end or the failure; `read` and `readNow` are not used after it. Delivers what is queued before returning.
   */
  listen(sink: ChunkSink): void {
    if (this.reader || this.sink) throw new AgentError('INVALID_ARGUMENT', 'concurrent read on one stream');
    if (this.failure) return sink.onError(this.failure);
    this.sink = sink;
    while (this.chunks.length > 0 && this.sink === sink) {
      const chunk = this.chunks.shift()!;
      this.queued -= chunk.length;
      this.onConsumed(chunk.length);
      sink.onChunk(chunk);
    }
    if (this.ended && this.sink === sink) {
      this.sink = undefined;
      sink.onEnd();
    }
  }

  /** A chunk already queued, taken without waiting; undefined when none is (the end and a failure are for `read`). */
  readNow(): Uint8Array | undefined {
    if (this.failure || this.sink) return undefined;
    const chunk = this.chunks.shift();
    if (!chunk) return undefined;
    this.queued -= chunk.length;
    this.onConsumed(chunk.length);
    return chunk;
  }

  /** The next chunk; undefined once ended; rejects once reset. */
  read(): Promise<Uint8Array | undefined> {
    if (this.failure) return Promise.reject(this.failure);
    const chunk = this.chunks.shift();
    if (chunk) {
      this.queued -= chunk.length;
      this.onConsumed(chunk.length);
      return Promise.resolve(chunk);
    }
    if (this.ended) return Promise.resolve(undefined);
    if (this.reader || this.sink) return Promise.reject(new AgentError('INVALID_ARGUMENT', 'concurrent read on one stream'));
    return new Promise((resolve, reject) => (this.reader = { resolve, reject }));
  }
}
