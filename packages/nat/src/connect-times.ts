import type { AgentId } from '@agentlink/core';
import { RecentPeers } from './recent-peers.js';

/** Peers whose connection start is remembered for the `path` event's `ms` (docs/rendezvous.md). */
export const CONNECT_TIMES_PEERS = 1024;

/**
 * When this agent last started connecting to each of its most recent peers, so a path found later (the punch
 * that lands after the relay carried the first call, an upgrade) reports how long it took from the start.
 * Bounded: an agent that reaches a new peer every minute for months would otherwise keep one entry per peer it
 * ever dialled. Past `maxPeers` the oldest start is forgotten; a path to a forgotten peer, or to one that dialled
 * us, reports 0 ms, as one found by the peer's own dial always has.
 */
export class ConnectTimes {
  /** Peer → when our last connection to it started. */
  private readonly started: RecentPeers<number>;

  constructor(
    maxPeers = CONNECT_TIMES_PEERS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.started = new RecentPeers(maxPeers);
  }

  start(peer: AgentId): void {
    this.started.set(peer, this.now());
  }

  /** Milliseconds since the connection to `peer` started; 0 when none is remembered. */
  since(peer: AgentId): number {
    const at = this.started.get(peer);
    return at === undefined ? 0 : this.now() - at;
  }

  get size(): number {
    return this.started.size;
  }
}
