import { toAgentError, type AgentId } from '@agentlink/core';
import { muxOverStream, type Channel, type ChannelStream, type ListenContext } from '@agentlink/core/transport';
import type { RelayService } from './discovery.js';
import { secureTunnel } from './secure-tunnel.js';

/**
 * The relayed path: a byte stream through the relay, secured by TLS end to end (the relay forwards ciphertext
 * only), carrying a multiplexed channel like any other.
 */
export class RelayPath {
  constructor(
    private readonly relay: RelayService,
    private readonly context: ListenContext,
  ) {}

  /** Opens a relayed channel to `peer` (we dial: TLS client). */
  async open(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    const stream = await this.relay.openRelay(peer, signal);
    const secured = await secureTunnel(stream, { tls: this.context.tls, role: 'client', expectedPeer: peer });
    return this.channel(secured.stream, peer, 'dialer');
  }

  /** A relay tunnel `from` a peer arrived: TLS server, then the channel goes to the pool as a relayed one. */
  async accept(tunnel: ChannelStream, from: AgentId): Promise<void> {
    try {
      const secured = await secureTunnel(tunnel, { tls: this.context.tls, role: 'server', expectedPeer: from });
      this.context.onChannel(this.channel(secured.stream, from, 'listener'), 'relay');
    } catch (error) {
      tunnel.reset(toAgentError(error, 'UNAUTHENTICATED'));
    }
  }

  private channel(stream: ChannelStream, peer: AgentId, role: 'dialer' | 'listener'): Channel {
    const channel = muxOverStream(stream, {
      kind: 'relay',
      peer,
      remoteAddress: `relay via ${this.relay.relayName}`,
      role,
      onStream: this.context.onStream,
      onRefused: this.context.onRefused,
    });
    channel.path = 'relay';
    return channel;
  }
}
