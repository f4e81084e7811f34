import type { AgentId } from '@agentlink/core';
import type { Channel } from '@agentlink/core/transport';
import { dialFirst } from './dial-first.js';
import type { PunchCoordinator } from './discovery.js';
import { punchTargets, type PredictionRole } from './port-prediction.js';
import { punchScope } from './punch-scope.js';
import { verifyRecord, type NatType, type PeerRecord, type SignedRecord } from './record.js';

/** Punches the rendezvous may ask of us at once, and the ceiling of predicted ports (docs/security.md). */
export const MAX_ANSWERS_IN_FLIGHT = 8;
export const MAX_PREDICT_PORTS = 32;
/** Peers remembered as being punched with at once (the oldest forgotten first): each stranger's punch adds one. */
export const MAX_PUNCHING_PEERS = 1024;

export interface PunchOptions {
  /** Budget of one attempt, port prediction included. */
  timeoutMs: number;
  /** Ports tried beyond a symmetric NAT's last mapping (twice as many by one side when both NATs are symmetric). */
  predictPorts: number;
}

/** Who we are and what our NAT looks like now: both sides of a symmetric pair must pick opposite probe roles. */
export interface PuncherSelf {
  id: AgentId;
  nat: () => NatType | undefined;
  /** Our public IP as STUN saw it: a peer seen at the same one is on our network, and its LAN candidates are dialled. */
  publicIp?: () => string | undefined;
}

/** What the rendezvous sends the target of a punch: who is dialling it, and that agent's record. */
export interface PunchRequest {
  peer: AgentId;
  record: SignedRecord;
  /**
   * The IP the rendezvous saw `peer` register from. We dial only candidates there (or on our own network when it
   * is our public IP too): the record's candidates are the peer's word, and could name a third party (punch-scope.ts).
   */
  seenAt?: string;
}

/**
 * Hole punching: both agents dial each other at the same moment from their QUIC sockets (the coordinator tells
 * the other side), so each NAT sees outgoing packets before the peer's arrive. Against a symmetric NAT the ports
 * it is likely to map next are tried too (port prediction), crossing probes from both sides when both NATs are
 * symmetric. Every dial shares one budget (`timeoutMs`); the first channel wins and the rest are cancelled.
 */
export class Puncher {
  /** Peers we are punching with, until when: a QUIC channel from them meanwhile came through the punch. */
  private readonly punching = new Map<AgentId, number>();
  /** Peers whose punch request we are answering: one at a time each, and MAX_ANSWERS_IN_FLIGHT in all. */
  private readonly answering = new Set<AgentId>();

  constructor(
    private readonly coordinator: PunchCoordinator,
    private readonly dial: (url: string, peer: AgentId, signal: AbortSignal) => Promise<Channel>,
    private readonly options: PunchOptions,
    private readonly self?: PuncherSelf,
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
    // Another agent's record (signed by it, so it verifies) would have us dial that agent, pinning its key: a
    // channel to someone else, which the pool files under them while the call still waits for `peer` — and
    // dials again. Before this check one call made 655 connections to such an agent in 3 s.
    if (theirs.agentId !== peer) return undefined;
    return this.dialBoth(theirs, signal);
  }

  /** The coordinator says `request.peer` is punching towards us: dial it back at once, from the same socket. */
  async answer(request: PunchRequest, signal: AbortSignal): Promise<Channel | undefined> {
    const theirs = verifyRecord(request.record);
    if (theirs.agentId !== request.peer) return undefined;
    if (request.seenAt !== undefined && typeof request.seenAt !== 'string') return undefined;
    // Bounded: a peer that asks again while we answer it, or more peers than the ceiling at once, get nothing.
    if (this.answering.has(theirs.agentId) || this.answering.size >= MAX_ANSWERS_IN_FLIGHT) return undefined;
    this.answering.add(theirs.agentId);
    try {
      this.expect(theirs.agentId);
      return await this.dialBoth(theirs, signal, (targets) => punchScope(targets, request.seenAt, this.self?.publicIp?.()));
    } finally {
      this.answering.delete(theirs.agentId);
    }
  }

  /** Which probes we send: crossing ones when both NATs are symmetric (port-prediction.ts), by AgentId order. */
  roleWith(theirs: PeerRecord): PredictionRole {
    if (theirs.nat !== 'symmetric' || this.self?.nat() !== 'symmetric') return 'single';
    return this.self.id < theirs.agentId ? 'wide' : 'sparse';
  }

  /** Whether a QUIC channel from `peer` that arrives now came through a punch (either side may keep the other's dial). */
  isPunching(peer: AgentId): boolean {
    const until = this.punching.get(peer);
    if (until === undefined) return false;
    if (Date.now() <= until) return true;
    this.punching.delete(peer);
    return false;
  }

  /** Peers remembered as being punched with now (at most MAX_PUNCHING_PEERS). */
  get punchingPeers(): number {
    return this.punching.size;
  }

  /**
   * Remembers that we punch with `peer` until its window ends. Every entry has the same window, so the Map's
   * insertion order is expiry order: expired ones are dropped from the front, and the oldest beyond the ceiling
   * too. Before, an entry stayed until that peer's next QUIC channel asked for it, so a stranger that made the
   * rendezvous send us punches from ever new keys grew this Map without end.
   */
  private expect(peer: AgentId): void {
    const now = Date.now();
    this.punching.delete(peer); // re-inserted as the newest
    this.punching.set(peer, now + this.options.timeoutMs + 2000);
    for (const [oldest, until] of this.punching) {
      if (until >= now && this.punching.size <= MAX_PUNCHING_PEERS) break;
      this.punching.delete(oldest);
    }
  }

  private dialBoth(theirs: PeerRecord, signal: AbortSignal, scope: (targets: string[]) => string[] = (t) => t): Promise<Channel | undefined> {
    const targets = scope(punchTargets(theirs, Math.min(this.options.predictPorts, MAX_PREDICT_PORTS), this.roleWith(theirs)));
    return dialFirst(targets, (url, s) => this.dial(url, theirs.agentId, s), this.options.timeoutMs, signal);
  }
}
