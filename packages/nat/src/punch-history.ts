import type { AgentId } from '@agentlink/core';
import { RecentPeers } from './recent-peers.js';

/**
 * Which peers our punches failed to reach lately, so the next connection to them races the relay from the start
 * instead of giving the punch a head start. Bounded: at most `maxPeers` entries (the oldest goes first), and a
 * failure is forgotten after `forgetAfterMs` (NATs and firewalls change) or at the first punch that works.
 */
export class PunchHistory {
  /** Peer → when its last punch failed. */
  private readonly failed: RecentPeers<number>;

  constructor(
    maxPeers: number,
    private readonly forgetAfterMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.failed = new RecentPeers(maxPeers);
  }

  failedLately(peer: AgentId): boolean {
    const at = this.failed.get(peer);
    if (at === undefined) return false;
    if (this.now() - at <= this.forgetAfterMs) return true;
    this.failed.delete(peer);
    return false;
  }

  recordFailure(peer: AgentId): void {
    this.failed.set(peer, this.now());
  }

  recordSuccess(peer: AgentId): void {
    this.failed.delete(peer);
  }

  get size(): number {
    return this.failed.size;
  }
}
