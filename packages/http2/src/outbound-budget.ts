/**
 * The bytes one HTTP/2 session's streams may have handed node:http2 and not yet seen sent. node buffers every
 * written chunk whole, whatever the peer's flow-control window: a peer that opens streams and never credits them
 * (SETTINGS_INITIAL_WINDOW_SIZE 0) would otherwise make us hold every byte our handlers produce for it. Writers
 * over the budget wait, first come first served, until sent bytes are given back.
 */
export class OutboundBudget {
  private used = 0;
  private readonly waiters: Array<{ bytes: number; wake: () => void }> = [];

  constructor(readonly limit: number) {}

  /** Bytes handed to node and not yet sent. */
  get bytes(): number {
    return this.used;
  }

  /**
   * Takes `bytes` if they fit and nobody waits before us; a write larger than the whole budget goes when nothing
   * is held. Otherwise returns false: call `waitFor`.
   */
  tryTake(bytes: number): boolean {
    if (this.waiters.length > 0 || !this.fits(bytes)) return false;
    this.used += bytes;
    return true;
  }

  /** `wake` runs once `bytes` were taken for the caller (first come first served). */
  waitFor(bytes: number, wake: () => void): void {
    this.waiters.push({ bytes, wake });
  }

  /** Withdraws a wait (its stream failed); nothing was taken for it. */
  cancel(wake: () => void): void {
    const index = this.waiters.findIndex((w) => w.wake === wake);
    if (index >= 0) this.waiters.splice(index, 1);
  }

  give(bytes: number): void {
    this.used -= bytes;
    while (this.waiters.length > 0 && this.fits(this.waiters[0]!.bytes)) {
      const waiter = this.waiters.shift()!;
      this.used += waiter.bytes;
      waiter.wake();
    }
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.limit;
  }
}
