import type { AgentId } from '@agentlink/core';

/**
 * Which peers our punches failed to reach lately, so the next connection to them races the relay from the start
 * instead of giving the punch a head start. Bounded: at most `maxPeers` entries (the oldest goes first), and a
 * failure is forgotten after `forgetAfterMs` (NATs and firewalls change) or at the first punch that works.
 */
export class PunchHistory {
  /** Peer → when its last punch failed; Map order is insertion order, so the first key is the oldest. */
  private readonly failed = new Map<AgentId, number>();

  constructor(
    private readonly maxPeers: number,
    private readonly forgetAfterMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  failedLately(peer: AgentId): boolean {
    const at = this.failed.get(peer);
    if (at === undefined) return false;
    if (this.now() - at <= this.forgetAfterMs) return true;
    this.failed.delete(peer);
    return false;
  }

  recordFailure(peer: AgentId): void {
    this.failed.delete(peer); // re-inserted as the newest
    this.failed.set(peer, this.now());
    while (this.failed.size > this.maxPeers) this.failed.delete(this.failed.keys().next().value!);
  }

  recordSuccess(peer: AgentId): void {
    this.failed.delete(peer);
  }

  get size(): number {
    return this.failed.size;
  }
}
