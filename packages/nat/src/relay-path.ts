import { setMaxListeners } from 'node:events';
import { toAgentError, type AgentId } from '@agentlink/core';
import { muxOverStream, type Channel, type ChannelStream, type ListenContext } from '@agentlink/core/transport';
import type { RelayService } from './discovery.js';
import { RelayAdmission } from './relay-admission.js';
import { secureTunnel } from './secure-tunnel.js';

/**
 * The relayed path: a byte stream through the relay, secured by TLS end to end (the relay forwards ciphertext
 * only), carrying a multiplexed channel like any other.
 */
export class RelayPath {
  /** What relays this agent did not ask for may cost it (relay-admission.ts). */
  readonly admission = new RelayAdmission();

  constructor(
    private readonly relay: RelayService,
    private readonly context: ListenContext,
    /** Aborts when the agent closes: tunnels waiting for a handshake turn stop waiting. */
    private readonly closing: AbortSignal,
  ) {
    // Every tunnel waiting for a handshake turn listens to it (up to MAX_ACCEPTED_RELAYS): no leak to warn of.
    setMaxListeners(0, closing);
  }

  /** Opens a relayed channel to `peer` (we dial: TLS client). */
  async open(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    const stream = await this.relay.openRelay(peer, signal);
    const secured = await secureTunnel(stream, { tls: this.context.tls, role: 'client', expectedPeer: peer });
    return this.channel(secured.stream, peer, 'dialer');
  }

  /**
   * A relay tunnel `from` a peer arrived through `rendezvous`, holding `place` (taken by `admission.admit()` as it
   * was accepted): TLS server once a handshake turn is free, then the channel goes to the pool as a relayed one. The
   * place is given back when the channel closes, or at once if the handshake fails.
   */
  async accept(tunnel: ChannelStream, from: AgentId, rendezvous: AgentId, place: () => void): Promise<void> {
    let turn: (() => void) | undefined;
    try {
      turn = await this.admission.handshakeTurn(rendezvous, this.closing);
      const secured = await secureTunnel(tunnel, { tls: this.context.tls, role: 'server', expectedPeer: from });
      turn();
      const channel = this.channel(secured.stream, from, 'listener');
      void channel.closed.then(place, place);
      this.context.onChannel(channel, 'relay');
    } catch (error) {
      turn?.();
      place();
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
