import type { Duplex } from 'node:stream';

/**
 * Bytes of one turn's frames held in the corked socket before they are written anyway: a producer that writes
 * a long burst without waiting sends it in pieces of about this size (a few TLS records each), not all at the
 * end of its turn, while small frames still share writes.
 */
export const BATCH_BYTES = 32 * 1024;

/**
 * Frames of one event-loop turn share socket writes: the socket is corked at the first frame that may wait and
 * uncorked at the end of the turn, or as soon as BATCH_BYTES are held. An urgent frame (a stream's first: a
 * call's request, a reply's first token) is never held: it leaves at once, with whatever was batched before it.
 */
export class TurnBatch {
  private corked = false;
  private endScheduled = false;
  private heldBytes = 0;
  private readonly endOfTurn = (): void => {
    this.endScheduled = false;
    this.flush();
  };

  constructor(private readonly raw: Duplex) {}

  /** Before a frame is handed to the WebSocket: cork for a frame that may wait. */
  before(urgent: boolean): void {
    if (urgent || this.corked) return;
    this.corked = true;
    this.raw.cork();
    if (!this.endScheduled) {
      this.endScheduled = true;
      process.nextTick(this.endOfTurn);
    }
  }

  /** After it: write now if it was urgent or the batch reached its budget. */
  after(bytes: number, urgent: boolean): void {
    if (!this.corked) return;
    this.heldBytes += bytes;
    if (urgent || this.heldBytes >= BATCH_BYTES) this.flush();
  }

  private flush(): void {
    this.heldBytes = 0;
    if (!this.corked) return;
    this.corked = false;
    this.raw.uncork();
  }
}
