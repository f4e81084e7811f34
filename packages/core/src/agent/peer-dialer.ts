import { diagnosticChannels } from '../diagnostics.js';
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
/** A dial that failed for a passing reason (a reset during a storm of dials) is tried again, this often in all. */
const DIAL_ATTEMPTS = 3;
/** Cap of the backoff before the second attempt; doubled after (full jitter under the cap). */
const DIAL_BACKOFF_MS = 50;

/**
 * Opens one channel to a peer from its known addresses: candidates in the agent's channel order (e.g. quic,
 * then http2, then ws), raced happy-eyeballs style, within the connect timeout.
 */
export class PeerDialer {
  constructor(private readonly options: PeerDialerOptions) {}

  canDial(peer: AgentId): boolean {
    return this.options.addresses.has(peer);
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
        if (channel && channel.peer !== peer) {
          // A plugin misled (e.g. by a hostile rendezvous) into reaching another agent: the pool would file the
          // channel under that agent while the call still waits for `peer`, and dial again at once, without end.
          void channel.close(new AgentError('UNAUTHENTICATED', `asked for ${peer}, reached ${channel.peer}`)).catch(() => undefined);
          throw new AgentError('UNAUTHENTICATED', `a plugin asked for a channel to ${peer} gave one to ${channel.peer}`);
        }
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
    // Addresses no configured channel dials fail the same way every time: no second try for them.
    const dialable = urls.some((url) => this.options.transports.some((t) => t.protocols.includes(url.protocol)));
    try {
      for (let attempt = 1; ; attempt++) {
        if (diagnosticChannels.dialStart.hasSubscribers) diagnosticChannels.dialStart.publish({ peer, urls, attempt });
        try {
          const channel = await this.dialAddresses(peer, urls, controller.signal);
          if (diagnosticChannels.dialConnected.hasSubscribers) diagnosticChannels.dialConnected.publish({ peer, channel, attempt });
          return channel;
        } catch (error) {
          // Only reachability failures are worth another try; a wrong key, a cancel or a timeout are final.
          const failure = error as AgentError;
          const final = failure.code !== 'UNAVAILABLE' || !dialable || controller.signal.aborted || attempt >= DIAL_ATTEMPTS;
          // Full jitter, in whole milliseconds: a fleet does not retry in step. At least 1: node runs a timer of 0
          // after 1 ms anyway, and a fake clock set to 0 during its own tick did too, so a published 0 was not the
          // wait (a test stepping the clock by it hung: the circuit-breaker test's flake, 1 full run in 8).
          const retryInMs = final ? undefined : 1 + Math.floor(Math.random() * (DIAL_BACKOFF_MS * 2 ** (attempt - 1) - 1));
          const waited = retryInMs === undefined ? undefined : backoff(retryInMs, controller.signal);
          // Published once the backoff's timer is set, so an observer (a test's fake clock) can step it.
          if (diagnosticChannels.dialError.hasSubscribers) diagnosticChannels.dialError.publish({ peer, error: failure, attempt, retryInMs });
          if (waited === undefined) throw failure;
          await waited;
        }
      }
    } finally {
      clearTimeout(timer);
      closing.removeEventListener('abort', onClosing);
    }
  }

  /** Dials the candidates (the addresses some configured channel dials), happy-eyeballs style. */
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

/** Waits `delayMs`; rejects with the signal's reason if it aborts first. */
function backoff(delayMs: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, delayMs);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
