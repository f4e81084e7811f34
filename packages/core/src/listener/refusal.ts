import type { ChannelKind } from '../channel.js';
import type { ErrorCode } from '../errors.js';
import type { AgentId } from '../identity/agent-id.js';

/** Where in a peer's arrival it was turned away. */
export type RefusalStage =
  /** Before any TLS work: listener limits (connections in all, per IP, new per IP per second). */
  | 'connection'
  /** During or right after the handshake: no or wrong certificate, handshake timeout. */
  | 'handshake'
  /** An authenticated channel the agent's connection gate (`authorizePeer` / `allowPeers`) refused. */
  | 'authorization'
  /** One stream or call refused or reset: stream limits, inbound budget, request timeout, inbound interceptors. */
  | 'stream';

/**
 * Why a peer was refused, reported by transports and core alike so refusals leave a trace: the agent publishes
 * each on `agentlink:peer:refused` (diagnostics_channel) and counts them in `agent.stats().refusals`.
 */
export interface Refusal {
  stage: RefusalStage;
  /** A short stable word, e.g. `max-connections`, `ip-rate`, `no-certificate`, `handshake-timeout`, `gate`, `budget`. */
  reason: string;
  /** The channel kind that refused (ws, http2, quic, relay …). */
  kind: ChannelKind;
  /** `ip:port` (or `[v6]:port`) of the peer, as far as known. */
  remoteAddress: string;
  /** The peer's AgentId once it proved one. */
  peer?: AgentId;
  /** The code the peer was refused with, where one was sent. */
  code?: ErrorCode;
  /** Human-readable detail (e.g. the TLS or QUIC handshake error). */
  detail?: string;
}

/** Stable counter key of a refusal: `stage:reason`. */
export function refusalKey(refusal: Pick<Refusal, 'stage' | 'reason'>): string {
  return `${refusal.stage}:${refusal.reason}`;
}
