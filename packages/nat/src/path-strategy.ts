import { AgentError, type Agent, type AgentId, type ChannelPath } from '@agentlink/core';
import type { Channel, ListenContext } from '@agentlink/core/transport';
import { dialFirst } from './dial-first.js';
import type { NatDiscovery } from './nat-type.js';
import type { Puncher } from './punch.js';
import type { PeerRecord } from './record.js';
import type { RelayPath } from './relay-path.js';

export type PathKind = 'direct' | 'punch' | 'relay';

export interface PathStrategyOptions {
  paths: ReadonlyArray<PathKind>;
  directTimeoutMs: number;
  predictPorts: number;
  upgradeIntervalMs: number;
}

/**
 * Which path to a peer, in which order: its direct candidates when it has no NAT (or shares ours), then a punch,
 * then the relay; punch and relay at once when a punch is unlikely to work; and while relayed, a punch now and
 * then to move to a direct path. Reports every path found.
 */
export class PathStrategy {
  private readonly upgrades = new Map<AgentId, NodeJS.Timeout>();

  constructor(
    private readonly agent: Agent,
    private readonly context: ListenContext,
    private readonly puncher: Puncher,
    private readonly relay: RelayPath,
    private readonly dialQuic: (url: string, peer: AgentId, signal: AbortSignal) => Promise<Channel>,
    private readonly nat: () => NatDiscovery | undefined,
    private readonly report: (peer: AgentId, path: ChannelPath, channel: Channel) => void,
    private readonly closing: AbortSignal,
    private readonly options: PathStrategyOptions,
  ) {}

  /** A channel to `peer`, whose record is `theirs`; undefined when the peer's own dial reached us meanwhile. */
  async connect(peer: AgentId, theirs: PeerRecord, signal: AbortSignal): Promise<Channel | undefined> {
    const { paths } = this.options;
    if (paths.includes('direct') && this.worthDialingDirectly(theirs)) {
      const direct = await dialFirst(theirs.candidates, (url, s) => this.dialQuic(url, peer, s), this.options.directTimeoutMs, signal);
      if (direct) return this.found(peer, 'direct', direct);
    }
    if (paths.includes('punch') && paths.includes('relay') && this.punchUnlikely(theirs)) return this.punchOrRelay(peer, signal);
    const punched = paths.includes('punch') ? await this.puncher.punch(peer, signal) : undefined;
    if (punched) return this.found(peer, 'punched', punched);
    // Our dial failed but the peer's reached us (we are the reachable side): the pool already has that channel.
    const arrived = this.agent.channels(peer).find((c) => !c.isClosed && c.path !== 'relay');
    if (arrived) {
      this.report(peer, arrived.path ?? 'direct', arrived);
      return undefined;
    }
    if (!paths.includes('relay')) throw new AgentError('UNAVAILABLE', `no direct or punched path to ${peer}, and the relay is not allowed`);
    const relayed = await this.relay.open(peer, signal);
    if (paths.includes('punch')) this.scheduleUpgrade(peer);
    return this.found(peer, 'relay', relayed);
  }

  /** A channel the puncher found after the peer asked for it: to the pool, labelled. */
  punchedFromPeer(channel: Channel): void {
    this.context.onChannel(channel, 'punched');
  }

  close(): void {
    for (const timer of this.upgrades.values()) clearTimeout(timer);
    this.upgrades.clear();
  }

  private found(peer: AgentId, path: ChannelPath, channel: Channel): Channel {
    channel.path = path;
    this.report(peer, path, channel);
    return channel;
  }

  /**
   * A symmetric NAT that allocates ports at random (its two STUN mappings far apart) defeats prediction; a
   * punch then works only against a full-cone NAT, which STUN cannot tell from a port-restricted one.
   */
  private punchUnlikely(theirs: PeerRecord): boolean {
    const ours = this.nat();
    const random = (nat: string, delta: number): boolean => nat === 'symmetric' && Math.abs(delta) > this.options.predictPorts;
    return (random(theirs.nat, theirs.portDelta) && ours?.type !== 'none') || (ours !== undefined && random(ours.type, ours.portDelta) && theirs.nat !== 'none');
  }

  /** Punch and relay at once; the first wins. A punch that lands after the relay upgrades the path. */
  private punchOrRelay(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const punch = this.puncher.punch(peer, signal).then(
        (channel) => {
          if (!channel) return;
          if (!settled) {
            settled = true;
            return resolve(this.found(peer, 'punched', channel));
          }
          this.context.onChannel(channel, 'punched'); // the relay came first: new calls move to this direct path
        },
        () => undefined,
      );
      this.relay.open(peer, signal).then(
        (channel) => {
          if (settled) return void channel.close();
          settled = true;
          resolve(this.found(peer, 'relay', channel));
          this.scheduleUpgrade(peer);
        },
        (error: unknown) => {
          void punch.then(() => {
            if (!settled) reject(error);
          });
        },
      );
    });
  }

  private worthDialingDirectly(theirs: PeerRecord): boolean {
    const ours = this.nat()?.mapped?.host;
    const sameNat = ours !== undefined && theirs.candidates[0]?.includes(`//${urlHost(ours)}:`);
    return theirs.nat === 'none' || theirs.nat === 'unknown' || sameNat === true;
  }

  /** While the peer is reached through the relay, try to punch again now and then; the pool prefers direct. */
  private scheduleUpgrade(peer: AgentId): void {
    if (this.upgrades.has(peer) || this.closing.aborted) return;
    const timer = setTimeout(async () => {
      this.upgrades.delete(peer);
      const open = this.agent.channels(peer).filter((c) => !c.isClosed);
      if (open.length === 0 || open.some((c) => c.path !== 'relay')) return; // gone, or already direct
      const channel = await this.puncher.punch(peer, this.closing).catch(() => undefined);
      if (channel) {
        this.context.onChannel(channel, 'punched');
        this.report(peer, 'punched', channel);
      } else this.scheduleUpgrade(peer);
    }, this.options.upgradeIntervalMs);
    timer.unref();
    this.upgrades.set(peer, timer);
  }
}

/** An IPv6 literal goes in brackets in a URL (quic://[2001:db8::1]:4433); names and IPv4 as they are. */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
