import type { NativeStream } from './native.js';

/**
 * A caller's end of a finished call, sent with the connection's next bytes instead of on its own.
 *
 * A caller ends its side of a call's stream only once the reply is in (until then it may still send a cancel with
 * its reason), so that FIN alone cost, per call, a crossing, a wake of the engine's thread, a packet and its ACK,
 * and at the peer a read batch and a wake of its event loop. The peer is not waiting for it (its side is done):
 * only the stream's release is. Held until the next write on this connection — a caller making calls one after
 * another writes its next request in the same turn, and the FIN leaves in the same packet — or the end of this
 * turn of the event loop at the latest. Releasing the stream sends it: the engine finishes a send half it drops
 * (quinn finishes an unfinished stream on drop), so the end and the release are one crossing, not two.
 */
export class LateEnds {
  private held: NativeStream[] = [];
  private scheduled = false;

  /** Ends and releases `native` with the next `flush`: everything written on it was taken by the engine. */
  hold(native: NativeStream): void {
    this.held.push(native);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.flushLater);
  }

  /** Sends every held end now: before a write on the connection, or when it closes. */
  flush(): void {
    if (this.held.length === 0) return;
    const held = this.held;
    this.held = [];
    for (const native of held) {
      try {
        native.release();
      } catch {
        // The connection is gone: there is no end to send, and its state goes with it.
      }
    }
  }

  private readonly flushLater = (): void => {
    this.scheduled = false;
    this.flush();
  };
}
