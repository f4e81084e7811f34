import { AgentError, toAgentError } from '../errors.js';
import type { Channel, Transport, TransportContext } from '../channel.js';
import { raceDials } from './dial-race.js';
import type { AgentId } from '../identity/agent-id.js';
import { raceSignal } from '../util/abort.js';
import type { AddressBook } from './peer-address.js';

export interface ChannelPoolOptions {
  transports: readonly Transport[];
  addresses: AddressBook;
  context: TransportContext;
  /** Upper bound for one dial attempt, whatever the callers' deadlines (default 10 s). */
  connectTimeoutMs?: number;
  /** Head start of each preferred candidate before the next one is dialled too (default 250 ms). */
  dialStaggerMs?: number;
  /** Channels without streams for this long are closed (default 5 min; 0 = never). */
  idleTimeoutMs?: number;
}

const DIAL_STAGGER_MS = 250;
const DEFAULT_IDLE_TIMEOUT_MS = 5 * 60_000;

/** How often a retired channel is checked for having no streams left. */
const RETIRE_CHECK_MS = 200;

/**
 * The channels an agent has, per peer: dialled by us or accepted from the peer, reused by every call.
 * Concurrent calls to a peer with no channel share one dial.
 */
export class ChannelPool {
  private readonly channels = new Map<AgentId, Set<Channel>>();
  private readonly dialing = new Map<AgentId, Promise<Channel>>();
  private readonly closing = new AbortController();
  /** Channels kept only for the calls already on them; closed once they have none. */
  private readonly retired = new Set<Channel>();
  private retireTimer: NodeJS.Timeout | undefined;
  /** When each channel was first seen without streams (idle reaping). */
  private readonly idleSince = new Map<Channel, number>();
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ChannelPoolOptions) {}

  /** An open channel to `peer`, if there is one: the per-call fast path, with no promise or signal. */
  openChannel(peer: AgentId): Channel | undefined {
    for (const channel of this.channels.get(peer) ?? []) if (!channel.isClosed && !this.retired.has(channel)) return channel;
    return undefined;
  }

  async acquire(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    const open = this.openChannel(peer);
    if (open) return open;
    let dial = this.dialing.get(peer);
    if (!dial) {
      dial = this.dial(peer).finally(() => this.dialing.delete(peer));
      this.dialing.set(peer, dial);
    }
    return raceSignal(dial, signal);
  }

  add(channel: Channel): void {
    let set = this.channels.get(channel.peer);
    if (!set) this.channels.set(channel.peer, (set = new Set()));
    set.add(channel);
    void channel.closed.then(() => {
      set.delete(channel);
      this.retired.delete(channel);
      this.idleSince.delete(channel);
      if (set.size === 0 && this.channels.get(channel.peer) === set) this.channels.delete(channel.peer);
    });
    this.settleCrossedDials(channel);
    this.watchIdle();
  }

  /** A stream started on `channel`: it is not idle. */
  touch(channel: Channel): void {
    this.idleSince.delete(channel);
  }

  /**
   * Closes channels that carried no stream for idleTimeoutMs: one is idle from the first check that finds it
   * without streams and without a stream started since (checks run every quarter of the timeout).
   */
  private watchIdle(): void {
    const idleTimeout = this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    if (idleTimeout <= 0 || this.idleTimer) return;
    this.idleTimer = setInterval(() => {
      const now = Date.now();
      for (const channel of this.list()) {
        if (channel.activeStreams > 0) {
          this.idleSince.delete(channel);
          continue;
        }
        const since = this.idleSince.get(channel);
        if (since === undefined) this.idleSince.set(channel, now);
        else if (now - since >= idleTimeout) void channel.close(new AgentError('CLOSED', `idle for ${idleTimeout} ms`));
      }
    }, Math.max(10, idleTimeout / 4)).unref();
  }

  /**
   * Two agents that dial each other at once (a hole punch does this on purpose) end up with two channels of the
   * same kind, one dialled by each. Both sides keep the one the lower AgentId dialled, so they agree without a
   * message; the other serves the calls already on it and closes when it has none.
   */
  private settleCrossedDials(added: Channel): void {
    const self = this.options.context.identity.id;
    const dialler = (c: Channel): AgentId => (c.initiator === 'local' ? self : c.peer);
    for (const other of this.channels.get(added.peer) ?? []) {
      if (other === added || other.kind !== added.kind || other.initiator === added.initiator) continue;
      if (other.isClosed || this.retired.has(other)) continue;
      this.retire(dialler(added) < dialler(other) ? other : added);
      return;
    }
  }

  private retire(channel: Channel): void {
    this.retired.add(channel);
    this.retireTimer ??= setInterval(() => {
      for (const c of this.retired) {
        if (c.activeStreams === 0) void c.close(new AgentError('CLOSED', 'duplicate channel: keeping the one the lower AgentId dialled'));
      }
      if (this.retired.size === 0) {
        clearInterval(this.retireTimer);
        this.retireTimer = undefined;
      }
    }, RETIRE_CHECK_MS).unref();
  }

  list(peer?: AgentId): Channel[] {
    if (peer !== undefined) return [...(this.channels.get(peer) ?? [])];
    return [...this.channels.values()].flatMap((set) => [...set]);
  }

  async close(reason: AgentError): Promise<void> {
    this.closing.abort(reason);
    clearInterval(this.retireTimer);
    clearInterval(this.idleTimer);
    const all = this.list();
    await Promise.all(all.map((channel) => channel.close(reason)));
    await Promise.all(all.map((channel) => channel.closed));
  }

  private async dial(peer: AgentId): Promise<Channel> {
    const urls = this.options.addresses.get(peer);
    if (urls.length === 0) {
      throw new AgentError('UNAVAILABLE', `no address known for ${peer}: call it as "<AgentId>@<url>" or agent.addPeer()`);
    }
    // One controller per dial, released when it settles (AbortSignal.any/timeout would linger for the timeout).
    const controller = new AbortController();
    const timeoutMs = this.options.connectTimeoutMs ?? 10_000;
    const timer = setTimeout(() => controller.abort(new AgentError('UNAVAILABLE', `connect timed out after ${timeoutMs} ms`)), timeoutMs);
    const onClosing = (): void => controller.abort(this.closing.signal.reason);
    this.closing.signal.addEventListener('abort', onClosing, { once: true });
    try {
      return await this.dialAddresses(peer, urls, controller.signal);
    } finally {
      clearTimeout(timer);
      this.closing.signal.removeEventListener('abort', onClosing);
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
    // Preference is the order of the agent's channels (e.g. quic, then http2, then ws); stable within a kind.
    candidates.sort((a, b) => transports.indexOf(a.transport) - transports.indexOf(b.transport));
    try {
      const { channel } = await raceDials(
        candidates,
        ({ url, transport }, attemptSignal) => transport.dial(url, { ...this.options.context, expectedPeer: peer, signal: attemptSignal }),
        signal,
        this.options.dialStaggerMs ?? DIAL_STAGGER_MS,
      );
      this.add(channel);
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
