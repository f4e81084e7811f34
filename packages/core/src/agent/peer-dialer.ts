import { AgentError } from '../errors.js';
import type { Channel, Transport, TransportContext } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import { raceDials } from './dial-race.js';
import type { AddressBook } from './peer-address.js';

export interface PeerDialerOptions {
  transports: readonly Transport[];
  addresses: AddressBook;
  context: TransportContext;
  /** Upper bound for one dial, whatever the callers' deadlines (default 10 s). */
  connectTimeoutMs?: number;
  /** Head start of each preferred candidate before the next one is dialled too (default 250 ms). */
  dialStaggerMs?: number;
  /** Asked in order when the peer has no known address or none answered (NAT traversal, relays). */
  connectors?: ReadonlyArray<(peer: AgentId, signal: AbortSignal) => Promise<Channel | undefined>>;
}

const DIAL_STAGGER_MS = 250;

/**
 * Opens one channel to a peer from its known addresses: candidates in the agent's channel order (e.g. quic,
 * then http2, then ws), raced happy-eyeballs style, within the connect timeout.
 */
export class PeerDialer {
  constructor(private readonly options: PeerDialerOptions) {}

  canDial(peer: AgentId): boolean {
    return this.options.addresses.get(peer).length > 0;
  }

  async dial(peer: AgentId, closing: AbortSignal): Promise<Channel> {
    const connectors = this.options.connectors ?? [];
    if (connectors.length === 0) return this.dialKnown(peer, closing);
    let failure: AgentError | undefined;
    try {
      if (this.canDial(peer)) return await this.dialKnown(peer, closing);
    } catch (error) {
      failure = error as AgentError;
      if (failure.code === 'UNAUTHENTICATED' || closing.aborted) throw failure;
    }
    for (const connect of connectors) {
      try {
        const channel = await connect(peer, closing);
        if (channel) return channel;
      } catch (error) {
        if (closing.aborted) throw error;
        // Both failed: say both, the known addresses' failure first.
        const reason = error instanceof AgentError ? error : new AgentError('UNAVAILABLE', String(error));
        failure = failure ? new AgentError(failure.code, `${failure.message}; then ${reason.message}`, { cause: reason }) : reason;
      }
    }
    throw failure ?? new AgentError('UNAVAILABLE', `no address known for ${peer} and no plugin could reach it`);
  }

  private async dialKnown(peer: AgentId, closing: AbortSignal): Promise<Channel> {
    const urls = this.options.addresses.get(peer);
    if (urls.length === 0) {
      throw new AgentError('UNAVAILABLE', `no address known for ${peer}: call it as "<AgentId>@<url>" or agent.addPeer()`);
    }
    // One controller per dial, released when it settles (AbortSignal.any/timeout would linger for the timeout).
    const controller = new AbortController();
    const timeoutMs = this.options.connectTimeoutMs ?? 10_000;
    const timer = setTimeout(() => controller.abort(new AgentError('UNAVAILABLE', `connect timed out after ${timeoutMs} ms`)), timeoutMs);
    const onClosing = (): void => controller.abort(closing.reason);
    closing.addEventListener('abort', onClosing, { once: true });
    try {
      return await this.dialAddresses(peer, urls, controller.signal);
    } finally {
      clearTimeout(timer);
      closing.removeEventListener('abort', onClosing);
    }
  }

  private async dialAddresses(peer: AgentId, urls: URL[], signal: AbortSignal): Promise<Channel> {
    const transports = this.options.transports;
    const failures: AgentError[] = [];
    const candidates: Array<{ url: URL; transport: Transport }> = [];
    for (const url of urls) {
      const transport = transports.find((t) => t.protocols.includes(url.protocol));
      if (transport) candidates.push({ url, transport });
      else failures.push(new AgentError('UNAVAILABLE', `no configured channel dials ${url.protocol}// (${url.href})`));
    }
    candidates.sort((a, b) => transports.indexOf(a.transport) - transports.indexOf(b.transport));
    try {
      const { channel } = await raceDials(
        candidates,
        ({ url, transport }, attemptSignal) => transport.dial(url, { ...this.options.context, expectedPeer: peer, signal: attemptSignal }),
        signal,
        this.options.dialStaggerMs ?? DIAL_STAGGER_MS,
      );
      return channel;
    } catch (error) {
      if (!Array.isArray(error)) throw error;
      failures.push(...(error as AgentError[]));
    }
    // A peer that answered with the wrong key is a security failure, not a reachability one: say so.
    const unauthenticated = failures.find((f) => f.code === 'UNAUTHENTICATED');
    if (unauthenticated) throw unauthenticated;
    const detail = failures.map((f) => f.message).join('; ');
    throw new AgentError('UNAVAILABLE', `cannot reach ${peer}: ${detail}`, { cause: failures[0] });
  }
}
