import diagnostics from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import {
  AgentError,
  parsePeerReference,
  toAgentError,
  type Agent,
  type AgentId,
  type AgentPlugin,
  type ChannelPath,
} from '@agentlink/core';
import {
  muxOverStream,
  type Channel,
  type ChannelStream,
  type ListenContext,
} from '@agentlink/core/transport';
import type { quic } from '@agentlink/quic';
import { discoverNat, localAddresses, type NatDiscovery } from './nat-type.js';
import { dialFirst } from './dial-first.js';
import { punchTargets } from './port-prediction.js';
import { signRecord, verifyRecord, type PeerRecord, type SignedRecord } from './record.js';
import { secureTunnel } from './secure-tunnel.js';
import { StunClient, type HostPort } from './stun.js';

export interface ReachOptions {
  /** The rendezvous, as `<AgentId>@wss://host:port/agentlink` (the agent needs a `webSocket()` channel to dial it). */
  rendezvous: string;
  /** The agent's QUIC transport, listening (port 0 is fine): STUN, punching and direct paths use its socket. */
  quic: ReturnType<typeof quic>;
  /** Re-registration interval (default 15 s); records live three intervals, so a dead agent's record expires. */
  heartbeatMs?: number;
  /** Budget of one punch attempt, port prediction included (default 3 s). */
  punchTimeoutMs?: number;
  /** Budget of the direct attempt at a peer without NAT (default 1.5 s). */
  directTimeoutMs?: number;
  /** Ports tried beyond a symmetric NAT's last mapping (default 8). */
  predictPorts?: number;
  /** While relayed, how often a direct path is tried again (default 10 s). */
  upgradeIntervalMs?: number;
  /** The ways to try, in this order (default all three); e.g. `['relay']` to test the relay, or no relay. */
  paths?: ReadonlyArray<'direct' | 'punch' | 'relay'>;
}

export interface PathEvent {
  peer: AgentId;
  path: ChannelPath;
  kind: string;
  /** How long finding this path took. */
  ms: number;
}

interface PunchRequest {
  peer: AgentId;
  record: SignedRecord;
}

/**
 * NAT traversal as an agent plugin. On start it learns its public mapping by STUN from the QUIC socket,
 * classifies the NAT and registers a signed record with the rendezvous (heartbeats keep it alive). A peer with
 * no known address is reached by, in order: its direct candidates (when it has no NAT), a punch coordinated by
 * the rendezvous (both sides dial each other at once from their QUIC sockets; port prediction against a
 * symmetric NAT), and the relay (TLS end to end through the rendezvous). While relayed it keeps trying to go
 * direct; new calls move over when it works. Every path found is reported as a `path` event.
 */
export class Reach extends EventEmitter<{ path: [PathEvent]; registered: [PeerRecord]; error: [AgentError] }> implements AgentPlugin {
  readonly name = 'nat';
  private agent!: Agent;
  private context!: ListenContext;
  private readonly rendezvousId: AgentId;
  private stun: StunClient | undefined;
  private discovery: NatDiscovery | undefined;
  private localPort = 0;
  private seq = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly upgrades = new Map<AgentId, NodeJS.Timeout>();
  /** Peers we are punching with: channels to them that open meanwhile are labelled `punched`. */
  private readonly punching = new Map<AgentId, number>();
  private readonly closing = new AbortController();

  constructor(private readonly options: ReachOptions) {
    super();
    this.rendezvousId = parsePeerReference(options.rendezvous).id;
  }

  get nat(): NatDiscovery | undefined {
    return this.discovery;
  }

  async start(agent: Agent, context: ListenContext): Promise<void> {
    this.agent = agent;
    this.context = context;
    agent.addPeer(this.options.rendezvous);
    agent.handle('nat.punch', (request: PunchRequest, ctx) => {
      this.fromRendezvous(ctx.peer);
      void this.answerPunch(request);
      return { ok: true };
    });
    agent.handleTunnel('nat.relay', ({ from }: { from: AgentId }, ctx) => {
      this.fromRendezvous(ctx.peer);
      return { accept: true, onOpen: (stream: ChannelStream) => void this.acceptRelay(stream, from) };
    });
    diagnostics.subscribe('agentlink:channel:open', this.labelPunched);
    const endpoint = await this.options.quic.endpoint();
    if (!endpoint) throw new AgentError('INVALID_ARGUMENT', 'reach() needs the agent to listen on its quic() channel (port 0 is fine)');
    this.localPort = endpoint.localPort;
    this.stun = new StunClient(endpoint);
    await this.register();
    const heartbeatMs = this.options.heartbeatMs ?? 15_000;
    this.heartbeat = setInterval(() => this.register().catch((e: unknown) => this.report(toAgentError(e))), heartbeatMs).unref();
  }

  async close(): Promise<void> {
    this.closing.abort(new AgentError('CLOSED', 'agent closed'));
    clearInterval(this.heartbeat);
    for (const timer of this.upgrades.values()) clearTimeout(timer);
    diagnostics.unsubscribe('agentlink:channel:open', this.labelPunched);
  }

  /** Learns the NAT (again: mappings change), then signs and registers this agent's record. */
  async register(): Promise<PeerRecord> {
    const info = await this.agent.send<{ stun: Array<{ host?: string; port: number }> }>(this.rendezvousId, 'rdv.info');
    const rendezvousHost = this.rendezvousHost();
    const servers: HostPort[] = info.stun.map((s) => ({ host: s.host ?? rendezvousHost, port: s.port }));
    this.discovery = await discoverNat(this.stun!, servers, this.localPort);
    const heartbeatMs = this.options.heartbeatMs ?? 15_000;
    this.seq = Math.max(this.seq + 1, Date.now());
    const mapped = this.discovery.mapped ? [quicUrl(this.discovery.mapped)] : [];
    const record: PeerRecord = {
      agentId: this.agent.id,
      candidates: [...new Set([...mapped, ...this.listenCandidates()])],
      nat: this.discovery.type,
      portDelta: this.discovery.portDelta,
      seq: this.seq,
      expiresAt: Date.now() + 3 * heartbeatMs,
    };
    await this.agent.send(this.rendezvousId, 'rdv.register', signRecord(this.agent.identity, record));
    this.emit('registered', record);
    return record;
  }

  /** Where the QUIC socket listens: its bound address, or every interface's when bound to all. */
  private listenCandidates(): string[] {
    return this.agent.addresses.flatMap((address) => {
      const url = new URL(address.slice(address.indexOf('@') + 1));
      if (url.protocol !== 'quic:') return [];
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (host !== '0.0.0.0' && host !== '::') return [`quic://${url.host}`];
      return localAddresses().map((ip) => quicUrl({ host: ip, port: Number(url.port) }));
    });
  }

  /** The pool asks for a channel to a peer it has no address for (or whose addresses failed). */
  async connect(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined> {
    if (peer === this.rendezvousId) return undefined;
    const started = performance.now();
    const theirs = verifyRecord(await this.agent.send<SignedRecord>(this.rendezvousId, 'rdv.lookup', { agentId: peer }, { signal }));
    if (theirs.agentId !== peer) throw new AgentError('UNAUTHENTICATED', 'the rendezvous answered with another agent\'s record');
    const report = (channel: Channel): Channel => {
      this.emit('path', { peer, path: channel.path ?? 'direct', kind: channel.kind, ms: performance.now() - started });
      return channel;
    };
    const paths = this.options.paths ?? ['direct', 'punch', 'relay'];
    if (paths.includes('direct') && this.worthDialingDirectly(theirs)) {
      const direct = await dialFirst(theirs.candidates, (url, s) => this.dialQuic(url, peer, s), this.options.directTimeoutMs ?? 1500, signal);
      if (direct) return report(direct);
    }
    if (paths.includes('punch') && paths.includes('relay') && this.punchUnlikely(theirs)) return report(await this.punchOrRelay(peer, signal));
    const punched = paths.includes('punch') ? await this.punch(peer, signal) : undefined;
    if (punched) return report(punched);
    // Our dial failed but the peer's reached us (we are the reachable side): the pool already has that channel.
    const arrived = this.agent.channels(peer).find((c) => !c.isClosed && c.path !== 'relay');
    if (arrived) {
      report(arrived);
      return undefined;
    }
    if (!paths.includes('relay')) throw new AgentError('UNAVAILABLE', `no direct or punched path to ${peer}, and the relay is not allowed`);
    const relayed = await this.relay(peer, signal);
    if (paths.includes('punch')) this.scheduleUpgrade(peer);
    return report(relayed);
  }

  /**
   * A symmetric NAT that allocates ports at random (its two STUN mappings far apart) defeats prediction; a
   * punch then works only against a full-cone NAT, which STUN cannot tell from a port-restricted one.
   */
  private punchUnlikely(theirs: PeerRecord): boolean {
    const ours = this.discovery;
    const random = (nat: string, delta: number): boolean => nat === 'symmetric' && Math.abs(delta) > (this.options.predictPorts ?? 8);
    return (random(theirs.nat, theirs.portDelta) && ours?.type !== 'none') || (ours !== undefined && random(ours.type, ours.portDelta) && theirs.nat !== 'none');
  }

  /** Punch and relay at once; the first wins. A punch that lands after the relay upgrades the path. */
  private punchOrRelay(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const punch = this.punch(peer, signal).then(
        (channel) => {
          if (!channel) return;
          if (!settled) {
            settled = true;
            return resolve(channel);
          }
          this.context.onChannel(channel); // the relay came first: new calls move to this direct path
        },
        () => undefined,
      );
      this.relay(peer, signal).then(
        (channel) => {
          if (settled) return void channel.close();
          settled = true;
          resolve(channel);
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
    const ours = this.discovery?.mapped?.host;
    const sameNat = ours !== undefined && theirs.candidates[0]?.includes(`//${urlHost(ours)}:`);
    return theirs.nat === 'none' || theirs.nat === 'unknown' || sameNat === true;
  }

  /** Asks the rendezvous to tell the peer to dial us now, and dials it at the same time. */
  private async punch(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined> {
    const timeoutMs = this.options.punchTimeoutMs ?? 3000;
    this.punching.set(peer, Date.now() + timeoutMs + 2000);
    let theirs: PeerRecord;
    try {
      theirs = verifyRecord(await this.agent.send<SignedRecord>(this.rendezvousId, 'rdv.punch', { target: peer }, { signal, timeoutMs }));
    } catch (error) {
      if (signal.aborted) throw error;
      return undefined; // the peer is not reachable through the rendezvous now: the relay will say so
    }
    const channel = await dialFirst(this.punchTargets(theirs), (url, s) => this.dialQuic(url, peer, s), timeoutMs, signal);
    if (channel) channel.path = 'punched';
    return channel;
  }

  /** The peer's candidates, and for a symmetric NAT the ports it is likely to map next (port prediction). */
  private punchTargets(record: PeerRecord): string[] {
    return punchTargets(record, this.options.predictPorts ?? 8);
  }

  /** The rendezvous says a peer is punching towards us: dial it back at once, from the same socket. */
  private async answerPunch(request: PunchRequest): Promise<void> {
    try {
      const theirs = verifyRecord(request.record);
      if (theirs.agentId !== request.peer) return;
      const timeoutMs = this.options.punchTimeoutMs ?? 3000;
      this.punching.set(theirs.agentId, Date.now() + timeoutMs + 2000);
      const channel = await dialFirst(this.punchTargets(theirs), (url, s) => this.dialQuic(url, theirs.agentId, s), timeoutMs, this.closing.signal);
      if (channel) {
        channel.path = 'punched';
        this.context.onChannel(channel);
      }
    } catch (error) {
      this.report(toAgentError(error));
    }
  }

  private async relay(peer: AgentId, signal: AbortSignal): Promise<Channel> {
    const { stream } = await this.agent.openTunnel(this.rendezvousId, 'rdv.relay', { target: peer }, { signal, timeoutMs: 10_000 });
    const secured = await secureTunnel(stream, { tls: this.context.tls, role: 'client', expectedPeer: peer });
    return this.relayChannel(secured.stream, peer, 'dialer');
  }

  private async acceptRelay(tunnel: ChannelStream, from: AgentId): Promise<void> {
    try {
      const secured = await secureTunnel(tunnel, { tls: this.context.tls, role: 'server', expectedPeer: from });
      this.context.onChannel(this.relayChannel(secured.stream, from, 'listener'));
    } catch (error) {
      tunnel.reset(toAgentError(error, 'UNAUTHENTICATED'));
    }
  }

  private relayChannel(stream: ChannelStream, peer: AgentId, role: 'dialer' | 'listener'): Channel {
    const channel = muxOverStream(stream, {
      kind: 'relay',
      peer,
      remoteAddress: `relay via ${this.rendezvousHost()}`,
      role,
      onStream: this.context.onStream,
      onRefused: this.context.onRefused,
    });
    channel.path = 'relay';
    return channel;
  }

  /** While the peer is reached through the relay, try to punch again now and then; the pool prefers direct. */
  private scheduleUpgrade(peer: AgentId): void {
    if (this.upgrades.has(peer) || this.closing.signal.aborted) return;
    const timer = setTimeout(async () => {
      this.upgrades.delete(peer);
      const relayed = this.agent.channels(peer).filter((c) => !c.isClosed);
      if (relayed.length === 0 || relayed.some((c) => c.path !== 'relay')) return; // gone, or already direct
      const started = performance.now();
      const channel = await this.punch(peer, this.closing.signal).catch(() => undefined);
      if (channel) {
        this.context.onChannel(channel);
        this.emit('path', { peer, path: 'punched', kind: channel.kind, ms: performance.now() - started });
      } else this.scheduleUpgrade(peer);
    }, this.options.upgradeIntervalMs ?? 10_000);
    timer.unref();
    this.upgrades.set(peer, timer);
  }

  private dialQuic(url: string, peer: AgentId, signal: AbortSignal): Promise<Channel> {
    return this.options.quic.dial(new URL(url), { ...this.context, expectedPeer: peer, signal });
  }

  /** Background failures (a heartbeat, a punch the peer asked for) go to `error` listeners, if there are any. */
  private report(error: AgentError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }

  private fromRendezvous(caller: AgentId): void {
    if (caller !== this.rendezvousId) throw new AgentError('UNAUTHENTICATED', 'only the rendezvous may ask this');
  }

  private rendezvousHost(): string {
    const { url } = parsePeerReference(this.options.rendezvous);
    // URL hostnames keep IPv6 literals in brackets; a socket address has none.
    return url ? new URL(url).hostname.replace(/^\[|\]$/g, '') : '127.0.0.1';
  }

  /** Labels QUIC channels to a peer we are punching with (either side may end up keeping the other's dial). */
  private readonly labelPunched = (message: unknown): void => {
    const { channel } = message as { channel: Channel };
    const until = this.punching.get(channel.peer);
    if (until === undefined) return;
    if (Date.now() > until) this.punching.delete(channel.peer);
    else if (channel.kind === 'quic' && channel.path === undefined) channel.path = 'punched';
  };
}

/** An IPv6 literal goes in brackets in a URL (quic://[2001:db8::1]:4433); names and IPv4 as they are. */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

function quicUrl({ host, port }: HostPort): string {
  return `quic://${urlHost(host)}:${port}`;
}

/** NAT traversal for an agent: `createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous, quic: q })] })`. */
export function reach(options: ReachOptions): Reach {
  return new Reach(options);
}
