/**
 * A token bucket that hands out reservations: taking a token may drive the balance below zero, and the caller
 * waits until its token would have been refilled. Waiters are thus served in arrival order without a queue.
 */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(
    /** Tokens added per second. */
    readonly ratePerSecond: number,
    /** Most tokens held (the burst a quiet caller may spend at once). */
    readonly burst: number,
  ) {
    this.tokens = burst;
    this.updatedAt = performance.now();
  }

  /** Milliseconds until a token reserved now is available (0 = at once). */
  delayIfTaken(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : ((1 - this.tokens) / this.ratePerSecond) * 1000;
  }

  /** Takes one token (the bucket may go into debt; callers check the delay first). */
  take(): void {
    this.tokens -= 1;
  }

  /** Gives back a reservation that will not be used (its call failed before it ran). */
  giveBack(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }

  private refill(): void {
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.updatedAt) / 1000) * this.ratePerSecond);
    this.updatedAt = now;
  }
}
