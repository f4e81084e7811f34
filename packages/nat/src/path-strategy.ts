import { AgentError, type Agent, type AgentId, type ChannelPath } from '@agentlink/core';
import type { Channel, ListenContext } from '@agentlink/core/transport';
import { dialFirst } from './dial-first.js';
import type { NatDiscovery } from './nat-type.js';
import type { Puncher } from './punch.js';
import type { PeerRecord } from './record.js';
import type { RelayPath } from './relay-path.js';
import { PunchHistory } from './punch-history.js';

/** Peers whose failed punches are remembered, and for how long (docs/security.md). */
export const PUNCH_HISTORY_PEERS = 1024;
export const PUNCH_HISTORY_MS = 10 * 60_000;

export type PathKind = 'direct' | 'punch' | 'relay';

export interface PathStrategyOptions {
  paths: ReadonlyArray<PathKind>;
  directTimeoutMs: number;
  upgradeIntervalMs: number;
  /**
   * How long a punch that is likely to work (no symmetric NAT on either side, no recent failure to this peer)
   * runs alone before the relay starts beside it; 0 races them from the start for every peer.
   */
  relayHeadStartMs: number;
}

/**
 * Which path to a peer, in which order: its direct candidates when it has no NAT (or shares ours), then a punch
 * raced against the relay (happy-eyeballs style): the relay starts at once when either NAT is symmetric or an
 * earlier punch to this peer failed, else after a short head start; the first path wins and carries the first
 * call. A punch that lands after the relay upgrades the path (the pool moves new calls to it and retires the
 * relay); one that fails is retried now and then while the peer is relayed. Reports every path found.
 */
export class PathStrategy {
  private readonly upgrades = new Map<AgentId, NodeJS.Timeout>();
  /** Channels already reported as a path: each is news once (the peer's dial and ours may both land). */
  private readonly reported = new WeakSet<Channel>();

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
    private readonly history: PunchHistory = new PunchHistory(PUNCH_HISTORY_PEERS, PUNCH_HISTORY_MS),
  ) {}

  /** A channel to `peer`, whose record is `theirs`; undefined when the peer's own dial reached us meanwhile. */
  async connect(peer: AgentId, theirs: PeerRecord, signal: AbortSignal): Promise<Channel | undefined> {
    const { paths } = this.options;
    if (paths.includes('direct') && this.worthDialingDirectly(theirs)) {
      const direct = await dialFirst(theirs.candidates, (url, s) => this.dialQuic(url, peer, s), this.options.directTimeoutMs, signal);
      if (direct) return this.found(peer, 'direct', direct);
    }
    if (paths.includes('punch') && paths.includes('relay')) return this.race(peer, this.relayHeadStart(peer, theirs), signal);
    const punched = paths.includes('punch') ? await this.punch(peer, signal) : undefined;
    if (punched) return this.found(peer, 'punched', punched);
    if (this.arrivedFromPeer(peer)) return undefined;
    if (!paths.includes('relay')) throw new AgentError('UNAVAILABLE', `no direct or punched path to ${peer}, and the relay is not allowed`);
    const relayed = await this.relay.open(peer, signal);
    if (paths.includes('punch')) this.scheduleUpgrade(peer);
    return this.found(peer, 'relay', relayed);
  }

  /** A channel the puncher found after the peer asked for it: to the pool, labelled, and reported. */
  punchedFromPeer(channel: Channel): void {
    this.history.recordSuccess(channel.peer);
    this.context.onChannel(channel, 'punched');
    this.announce(channel.peer, 'punched', channel);
  }

  /**
   * The peer's dial reached us while we punched towards it (a QUIC channel labelled `punched` as it entered the
   * pool): either side's dial may be the one that lands, and when it is the peer's, this is the upgrade — without
   * it a relayed peer's upgrade went unreported and the retries stopped (a direct channel is there) in silence.
   */
  punchedArrived(channel: Channel): void {
    this.history.recordSuccess(channel.peer);
    this.announce(channel.peer, 'punched', channel);
  }

  close(): void {
    for (const timer of this.upgrades.values()) clearTimeout(timer);
    this.upgrades.clear();
  }

  /**
   * How long the punch runs alone before the relay joins: not at all when a punch is unlikely to work soon — a
   * symmetric NAT on either side (port prediction is a guess, and a random allocator defeats it) or a punch to
   * this peer that failed lately (a firewall that drops UDP, say) — else the configured head start.
   */
  relayHeadStart(peer: AgentId, theirs: PeerRecord): number {
    const symmetric = theirs.nat === 'symmetric' || this.nat()?.type === 'symmetric';
    return symmetric || this.history.failedLately(peer) ? 0 : this.options.relayHeadStartMs;
  }

  private found(peer: AgentId, path: ChannelPath, channel: Channel): Channel {
    channel.path = path;
    this.announce(peer, path, channel);
    return channel;
  }

  /**
   * Reports a path, once per change: when both sides' dials land, the second direct channel is no news (and a
   * direct path is not reported again while another is open). The relay is reported whenever it is found.
   */
  private announce(peer: AgentId, path: ChannelPath, channel: Channel): void {
    if (this.reported.has(channel)) return;
    const alreadyDirect = this.agent.channels(peer).some((c) => c !== channel && !c.isClosed && c.path !== undefined && c.path !== 'relay');
    if (path !== 'relay' && alreadyDirect) return;
    this.reported.add(channel);
    this.report(peer, path, channel);
  }

  /** A punch, remembered: a failure makes the next connection to this peer race the relay from the start. */
  private async punch(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined> {
    const channel = await this.puncher.punch(peer, signal);
    if (channel) this.history.recordSuccess(peer);
    else if (!signal.aborted) this.history.recordFailure(peer);
    return channel;
  }

  /** Our dial failed but the peer's reached us (we are the reachable side): the pool already has that channel. */
  private arrivedFromPeer(peer: AgentId): boolean {
    const arrived = this.agent.channels(peer).find((c) => !c.isClosed && c.path !== 'relay');
    if (arrived) this.announce(peer, arrived.path ?? 'direct', arrived);
    return arrived !== undefined;
  }

  /**
   * Punch and relay; the first path wins. The relay starts after `headStartMs`, or at once when the punch fails
   * sooner. The punch is never cancelled by the relay's win: when it lands later, the pool upgrades to it; when
   * it fails, a retry is scheduled while the peer stays relayed.
   */
  private race(peer: AgentId, headStartMs: number, signal: AbortSignal): Promise<Channel | undefined> {
    return new Promise((resolve, reject) => {
      let settled = false;
      let relayStarted = false;
      let relayWon = false;
      let punchFailed = false;
      let punchError: unknown;
      let relayError: unknown;
      const settle = (outcome: () => void): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(headStart);
        outcome();
        return true;
      };
      const failIfBothFailed = (): void => {
        if (punchFailed && relayError !== undefined) settle(() => reject(punchError ?? relayError));
      };
      const startRelay = (): void => {
        if (relayStarted || settled) return;
        relayStarted = true;
        this.relay.open(peer, signal).then(
          (channel) => {
            if (!settle(() => resolve(this.found(peer, 'relay', channel)))) return void channel.close();
            relayWon = true;
            if (punchFailed) this.scheduleUpgrade(peer);
          },
          (error: unknown) => {
            relayError = error;
            failIfBothFailed();
          },
        );
      };
      const headStart = headStartMs > 0 ? setTimeout(startRelay, headStartMs) : undefined;
      if (headStartMs <= 0) startRelay();
      this.punch(peer, signal).then(
        (channel) => {
          if (channel) {
            if (settle(() => resolve(this.found(peer, 'punched', channel)))) return;
            // The relay came first and carried the first call: new calls move to this direct path.
            this.context.onChannel(channel, 'punched');
            this.announce(peer, 'punched', channel);
            return;
          }
          punchFailed = true;
          if (!settled && this.arrivedFromPeer(peer)) return void settle(() => resolve(undefined));
          if (relayWon) this.scheduleUpgrade(peer);
          startRelay();
          failIfBothFailed();
        },
        (error: unknown) => {
          punchFailed = true;
          punchError = error; // aborted: the relay, if started, sees the same signal
          if (!relayStarted) settle(() => reject(error));
          failIfBothFailed();
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
      const channel = await this.punch(peer, this.closing).catch(() => undefined);
      if (channel) {
        this.context.onChannel(channel, 'punched');
        this.announce(peer, 'punched', channel);
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
