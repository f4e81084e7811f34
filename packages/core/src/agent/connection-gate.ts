import { AgentError } from '../errors.js';
import type { Channel } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import type { Refusal } from '../listener/refusal.js';

/** Decides once per channel whether its authenticated peer may call this agent. Throwing counts as no. */
export type AuthorizePeer = (peer: AgentId, remoteAddress: string) => boolean | Promise<boolean>;

/** Which peers an agent accepts channels from: an allow list or an `authorizePeer` callback. */
export interface GateOptions {
  /** Asked once per channel, before any stream of it is served. */
  authorizePeer?: AuthorizePeer;
  /** Shorthand: only these AgentIds may call (checked before `authorizePeer`, both must allow). */
  allowPeers?: Iterable<AgentId>;
}

/**
 * The connection gate (js-libp2p's connection gater, in one question): which authenticated peers may open calls
 * to this agent. A channel a peer opened to us and the gate refuses is closed with PERMISSION_DENIED before any
 * of its streams is served; on a channel we dialled, only the peer's calls back to us are refused.
 */
export class ConnectionGate {
  private readonly decisions = new WeakMap<Channel, boolean | Promise<boolean>>();
  private readonly allowed: ReadonlySet<AgentId> | undefined;

  constructor(
    private readonly options: GateOptions,
    private readonly refused: (refusal: Refusal) => void,
  ) {
    this.allowed = options.allowPeers ? new Set(options.allowPeers) : undefined;
  }

  /** False when the agent admits every authenticated peer: nothing to ask. */
  get active(): boolean {
    return this.allowed !== undefined || this.options.authorizePeer !== undefined;
  }

  /** The decision for `channel`: asked the first time, remembered for the channel's life. */
  decide(channel: Channel): boolean | Promise<boolean> {
    let decision = this.decisions.get(channel);
    if (decision === undefined) {
      decision = this.ask(channel);
      this.decisions.set(channel, decision);
      if (typeof decision !== 'boolean') void decision.then((allowed) => this.decisions.set(channel, allowed));
    }
    return decision;
  }

  /** The error a refused peer's streams and channel get. */
  denial(channel: Channel): AgentError {
    return new AgentError('PERMISSION_DENIED', `agent ${channel.peer} is not allowed to call this agent`);
  }

  private ask(channel: Channel): boolean | Promise<boolean> {
    if (this.allowed && !this.allowed.has(channel.peer)) return this.refuse(channel);
    const authorize = this.options.authorizePeer;
    if (!authorize) return true;
    let answer: boolean | Promise<boolean>;
    try {
      answer = authorize(channel.peer, channel.remoteAddress);
    } catch (error) {
      return this.refuse(channel, error);
    }
    if (typeof answer === 'boolean') return answer || this.refuse(channel);
    return Promise.resolve(answer).then(
      (allowed) => allowed === true || this.refuse(channel),
      (error: unknown) => this.refuse(channel, error),
    );
  }

  private refuse(channel: Channel, error?: unknown): false {
    const detail = error === undefined ? undefined : `authorizePeer threw: ${error instanceof Error ? error.message : String(error)}`;
    this.refused({ stage: 'authorization', reason: 'gate', kind: channel.kind, remoteAddress: channel.remoteAddress, peer: channel.peer, code: 'PERMISSION_DENIED', detail });
    return false;
  }
}
