import type { AgentId } from '@agentlink/core';

/**
 * A value per peer for the most recent `maxPeers` peers: setting a peer makes it the newest, and past the bound
 * the oldest is forgotten (Map order is insertion order, so the first key is the oldest). What `PunchHistory` and
 * `ConnectTimes` keep, so neither grows with every peer an agent ever meets.
 */
export class RecentPeers<V> {
  private readonly values = new Map<AgentId, V>();

  constructor(private readonly maxPeers: number) {}

  set(peer: AgentId, value: V): void {
    this.values.delete(peer); // re-inserted as the newest
    this.values.set(peer, value);
    while (this.values.size > this.maxPeers) this.values.delete(this.values.keys().next().value!);
  }

  get(peer: AgentId): V | undefined {
    return this.values.get(peer);
  }

  delete(peer: AgentId): void {
    this.values.delete(peer);
  }

  get size(): number {
    return this.values.size;
  }
}
