import type { Channel, ChannelPath, ListenContext } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import type { Agent } from './agent.js';

/**
 * Extends how an agent reaches peers, e.g. NAT traversal (`@agentlink/nat`): it starts with the agent, and the
 * pool asks it for a channel to a peer that has no known address or whose addresses all failed.
 */
export interface AgentPlugin {
  readonly name: string;
  /** Called once the agent listens. `context` is what transports get: add channels with `context.onChannel`. */
  start?(agent: Agent, context: ListenContext): Promise<void>;
  /** A channel to `peer` by this plugin's means, or undefined when it has none to offer. */
  connect?(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined>;
  /**
   * The path of a channel a peer opened to us through a listener, as it enters the pool (e.g. a QUIC channel from
   * a peer we are punching with is `punched`); undefined when this plugin does not know it.
   */
  pathOf?(channel: Channel): ChannelPath | undefined;
  /** Called when the agent closes, before its channels close. */
  close?(): Promise<void>;
}
