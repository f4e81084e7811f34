import type { NativeConnection, NativeReadEvent, NativeStream } from './native.js';

/** What a stream does with its finished push read (must not throw: it runs in the engine's callback). */
export interface PushReader {
  onRead(event: NativeReadEvent): void;
}

/**
 * A connection's push reads (native/src/reads.rs): a stream arms a read with its token, the engine waits on every
 * armed stream in one task and calls back once per batch of finished reads, and this hands each to its stream.
 * One crossing per batch instead of an async call (a task, a promise, a wake) per stream and read; with push
 * accepts, the streams the peer opened come in the same batches.
 */
export class PushReads {
  private readonly waiting = new Map<number, PushReader>();
  private nextToken = 0;
  readonly running: boolean;

  /** `onAccepted`: streams the peer opens come in the same batches (push accepts) instead of `acceptStreams`. */
  constructor(
    private readonly connection: NativeConnection,
    private readonly onAccepted?: (stream: NativeStream) => void,
  ) {
    this.running = connection.startReads(this.ready, onAccepted !== undefined);
  }

  /**
   * A token for a new stream: one read at a time per stream, so one token per stream is enough. 1 to 2^32 − 1,
   * wrapping past 0, which marks an accepted stream in a batch (NativeReadEvent.token).
   */
  token(): number {
    this.nextToken = (this.nextToken % 0xffff_ffff) + 1;
    return this.nextToken;
  }

  /**
   * `native`'s bytes if they are here, else its next read armed for `reader` (true), in one crossing; false when
   * push reads are not running or the connection's reads ended (then the async `read`).
   */
  readOrArm(native: NativeStream, token: number, reader: PushReader, max: number): Buffer | boolean {
    if (!this.running) return false;
    const ready = native.readOrArm(token, max);
    if (ready === true) this.waiting.set(token, reader);
    return ready;
  }

  private readonly ready = (): void => {
    for (const event of this.connection.takeReads()) {
      if (event.stream) {
        this.onAccepted?.(event.stream);
        continue;
      }
      const reader = this.waiting.get(event.token);
      if (!reader) continue;
      this.waiting.delete(event.token);
      reader.onRead(event);
    }
  };
}
