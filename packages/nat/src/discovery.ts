import type { AgentId } from '@agentlink/core';
import type { ChannelStream } from '@agentlink/core/transport';
import type { PeerRecord, SignedRecord } from './record.js';

/**
 * Where agents find each other (as iroh separates discovery from hole punching and relaying): an agent publishes
 * its signed record, and resolves a peer's. The rendezvous is one backend (`RendezvousClient`); anything that
 * stores signed records could be another. Records are verified by the caller of `resolve`, never trusted.
 */
export interface Discovery {
  publish(record: SignedRecord): Promise<void>;
  /** The peer's record, verified (signature, expiry, and that it names `peer`). */
  resolve(peer: AgentId, signal?: AbortSignal): Promise<PeerRecord>;
}

/** Tells a peer to dial us now, and gives us its record (the rendezvous does it over the peer's control channel). */
export interface PunchCoordinator {
  requestPunch(peer: AgentId, signal: AbortSignal, timeoutMs: number): Promise<SignedRecord>;
}

/** Opens a byte stream to a peer through a relay (a tunnel the relay splices to the peer's). */
export interface RelayService {
  openRelay(peer: AgentId, signal: AbortSignal): Promise<ChannelStream>;
  /** How the relay is named in a channel's remote address. */
  readonly relayName: string;
}
