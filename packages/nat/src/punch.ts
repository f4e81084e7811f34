import type { AgentId } from '@agentlink/core';
import type { Channel } from '@agentlink/core/transport';
import { dialFirst } from './dial-first.js';
import type { PunchCoordinator } from './discovery.js';
import { punchTargets } from './port-prediction.js';
import { verifyRecord, type PeerRecord, type SignedRecord } from './record.js';

export interface PunchOptions {
  /** Budget of one attempt, port prediction included. */
  timeoutMs: number;
  /** Ports tried beyond a symmetric NAT's last mapping. */
  predictPorts: number;
}

/** What the rendezvous sends the target of a punch: who is dialling it, and that agent's record. */
export interface PunchRequest {
  peer: AgentId;
  record: SignedRecord;
}

/**
 * Hole punching: both agents dial each other at the same moment from their QUIC sockets (the coordinator tells
 * the other side), so each NAT sees outgoing packets before the peer's arrive. Against a symmetric NAT the ports
 * it is likely to map next are tried too (port prediction).
 */
export class Puncher {
  /** Peers we are punching with, until when: a QUIC channel from them meanwhile came through the punch. */
  private readonly punching = new Map<AgentId, number>();

  constructor(
    private readonly coordinator: PunchCoordinator,
    private readonly dial: (url: string, peer: AgentId, signal: AbortSignal) => Promise<Channel>,
    private readonly options: PunchOptions,
  ) {}

  /** Asks the coordinator to have `peer` dial us now, and dials it at the same time. Undefined when it fails. */
  async punch(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined> {
    this.expect(peer);
    let theirs: PeerRecord;
    try {
      theirs = verifyRecord(await this.coordinator.requestPunch(peer, signal, this.options.timeoutMs));
    } catch (error) {
      if (signal.aborted) throw error;
      return undefined; // the peer is not reachable through the rendezvous now: the relay will say so
    }
    return this.dialBoth(theirs, signal);
  }

  /** The coordinator says `request.peer` is punching towards us: dial it back at once, from the same socket. */
  async answer(request: PunchRequest, signal: AbortSignal): Promise<Channel | undefined> {
    const theirs = verifyRecord(request.record);
    if (theirs.agentId !== request.peer) return undefined;
    this.expect(theirs.agentId);
    return this.dialBoth(theirs, signal);
  }

  /** Whether a QUIC channel from `peer` that arrives now came through a punch (either side may keep the other's dial). */
  isPunching(peer: AgentId): boolean {
    const until = this.punching.get(peer);
    if (until === undefined) return false;
    if (Date.now() <= until) return true;
    this.punching.delete(peer);
    return false;
  }

  private expect(peer: AgentId): void {
    this.punching.set(peer, Date.now() + this.options.timeoutMs + 2000);
  }

  private dialBoth(theirs: PeerRecord, signal: AbortSignal): Promise<Channel | undefined> {
    const targets = punchTargets(theirs, this.options.predictPorts);
    return dialFirst(targets, (url, s) => this.dial(url, theirs.agentId, s), this.options.timeoutMs, signal);
  }
}
