import type { Duplex } from 'node:stream';

/**
 * Bytes of one turn's frames held in the corked socket before they are written anyway: a producer that writes
 * a long burst without waiting sends it in pieces of about this size (a few TLS records each), not all at the
 * end of its turn, while small frames still share writes.
 */
export const BATCH_BYTES = 32 * 1024;

/**
 * Frames of one event-loop turn share socket writes: the socket is corked at a turn's first frame and uncorked
 * at the end of the turn, as soon as BATCH_BYTES are held, before a stream's second data frame (`before(true)`),
 * or after the turn's first frame someone waits for (`after(bytes, true)`: a streamed call's request, a stream's
 * first item):
 * a unary call's message, its FIN and the other calls of the turn leave in one TLS record, while a streamed
 * call's request and its first token leave when they are written, not at the end of the turn or of a burst.
 */
export class TurnBatch {
  private corked = false;
  private endScheduled = false;
  private heldBytes = 0;
  /**
   * A frame left at once this turn (`after(bytes, true)`): later ones of the turn wait for its end, so a caller
   * that starts 100 streamed calls in one loop makes two writes, not 100; the first request leaves at once.
   */
  private flushedAtOnce = false;
  private readonly endOfTurn = (): void => {
    this.endScheduled = false;
    this.flushedAtOnce = false;
    this.flush();
  };

  constructor(private readonly raw: Duplex) {}

  /** Before a frame is handed to the WebSocket: `flushBefore` sends what is held first; then the frame is held. */
  before(flushBefore: boolean): void {
    if (flushBefore) this.flush();
    if (this.corked) return;
    this.corked = true;
    this.raw.cork();
    this.endOfTurnScheduled();
  }

  /** After it: write now once the batch reached its budget, or when the frame must leave at once (`flushAfter`). */
  after(bytes: number, flushAfter = false): void {
    this.heldBytes += bytes;
    if (flushAfter && !this.flushedAtOnce) {
      this.flushedAtOnce = true;
      this.flush();
      this.endOfTurnScheduled(); // which forgets the flag
    } else if (this.heldBytes >= BATCH_BYTES) {
      this.flush();
    }
  }

  private endOfTurnScheduled(): void {
    if (this.endScheduled) return;
    this.endScheduled = true;
    process.nextTick(this.endOfTurn);
  }

  private flush(): void {
    this.heldBytes = 0;
    if (!this.corked) return;
    this.corked = false;
    this.raw.uncork();
  }
}
