import { EventEmitter } from 'node:events';
import {
  AgentError,
  isAgentId,
  toAgentError,
  type Agent,
  type AgentId,
  type AgentPlugin,
  type ChannelPath,
} from '@agentlink/core';
import { MAX_TIMER_MS, type Channel, type ChannelStream, type ListenContext } from '@agentlink/core/transport';
import type { quic } from '@agentlink/quic';
import { ConnectTimes } from './connect-times.js';
import { discoverNat, localAddresses, settleDiscovery, type NatDiscovery } from './nat-type.js';
import { PathStrategy, urlHost, type PathKind } from './path-strategy.js';
import { MAX_PREDICT_PORTS, Puncher, type PunchRequest } from './punch.js';
import { signRecord, type PeerRecord } from './record.js';
import { RelayPath } from './relay-path.js';
import { RendezvousClient } from './rendezvous-client.js';
import { StunClient, type HostPort } from './stun.js';

/** How often an agent registers again by default (`heartbeatMs`); its record lives three of them. */
export const DEFAULT_HEARTBEAT_MS = 15_000;

export interface ReachOptions {
  /**
   * The rendezvous, as `<AgentId>@wss://host:port/agentlink` (the agent needs a `webSocket()` channel to dial it),
   * or several (instances of one cluster, or independent ones): the agent registers with one and moves to another
   * (in a random order) when it fails; lookups try them all. A cluster's other instances are learned from the one
   * reached, renewed at every registration.
   */
  rendezvous: string | readonly string[];
  /** The agent's QUIC transport, listening (port 0 is fine): STUN, punching and direct paths use its socket. */
  quic: ReturnType<typeof quic>;
  /** Re-registration interval (default 15 s); records live three intervals, so a dead agent's record expires. */
  heartbeatMs?: number;
  /** Budget of one punch attempt, port prediction included (default 3 s). */
  punchTimeoutMs?: number;
  /** Budget of the direct attempt at a peer without NAT (default 1.5 s). */
  directTimeoutMs?: number;
  /** Ports tried beyond a symmetric NAT's last mapping (default 8, at most 32; twice that by one side when both NATs are symmetric). */
  predictPorts?: number;
  /**
   * How long a punch likely to work (no symmetric NAT, no recent failure to that peer) runs alone before the relay
   * starts beside it (default 200 ms; 0 races every punch with the relay). The first path carries the first call;
   * a punch that lands later upgrades the path.
   */
  relayHeadStartMs?: number;
  /** While relayed, how often a direct path is tried again (default 10 s). */
  upgradeIntervalMs?: number;
  /** The ways to try, in this order (default all three); e.g. `['relay']` to test the relay, or no relay. */
  paths?: ReadonlyArray<PathKind>;
}

export interface PathEvent {
  peer: AgentId;
  path: ChannelPath;
  kind: string;
  /**
   * How long finding this path took: from when this agent last started connecting to the peer (a punch that lands
   * after the relay, or an upgrade, counts from there too). 0 for a path the peer's own dial found, and for a peer
   * whose start was forgotten (the starts of the last 1,024 peers are kept: `CONNECT_TIMES_PEERS`).
   */
  ms: number;
}

/**
 * NAT traversal as an agent plugin, in separate concerns (as iroh separates them): discovery (`RendezvousClient`:
 * publish this agent's signed record, resolve a peer's, fail over between rendezvous), hole punching (`Puncher`),
 * the relayed path (`RelayPath`) and the order in which paths are tried (`PathStrategy`). This class wires them:
 * on start it learns its public mapping by STUN from the QUIC socket, classifies the NAT and registers; heartbeats
 * keep the record alive and move it to another rendezvous when the one in use fails.
 */
export class Reach extends EventEmitter<{ path: [PathEvent]; registered: [PeerRecord]; error: [AgentError] }> implements AgentPlugin {
  readonly name = 'nat';
  private agent!: Agent;
  private context!: ListenContext;
  private rendezvous!: RendezvousClient;
  private puncher!: Puncher;
  private strategy!: PathStrategy;
  private relayPath!: RelayPath;
  private stun: StunClient | undefined;
  private discovery: NatDiscovery | undefined;
  /** Registrations in a row whose STUN got no answer at all: the mapping learned before is kept for a few only. */
  private unansweredInARow = 0;
  private localPort = 0;
  private seq = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private reregister: NodeJS.Timeout | undefined;
  private registering: Promise<PeerRecord> | undefined;
  private readonly connectTimes = new ConnectTimes();
  private readonly closing = new AbortController();

  constructor(private readonly options: ReachOptions) {
    super();
    const list = typeof options.rendezvous === 'string' ? [options.rendezvous] : options.rendezvous;
    if (!Array.isArray(list) || list.length === 0 || !list.every((r) => typeof r === 'string')) {
      throw new AgentError('INVALID_ARGUMENT', 'rendezvous must be an address or a non-empty list of addresses');
    }
    // Timer periods, so within node's longest delay: above it a timer fires after 1 ms, and the heartbeat's
    // interval re-registered with the rendezvous every millisecond.
    for (const name of ['heartbeatMs', 'punchTimeoutMs', 'directTimeoutMs', 'upgradeIntervalMs'] as const) checkInteger(name, options[name], 1, MAX_TIMER_MS);
    checkInteger('relayHeadStartMs', options.relayHeadStartMs, 0, MAX_TIMER_MS);
    checkInteger('predictPorts', options.predictPorts, 0, MAX_PREDICT_PORTS);
  }

  get nat(): NatDiscovery | undefined {
    return this.discovery;
  }

  /** The rendezvous this agent is registered with now (it changes on failover). */
  get registeredWith(): AgentId | undefined {
    return this.rendezvous?.currentId;
  }

  private get heartbeatMs(): number {
    return this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  }

  async start(agent: Agent, context: ListenContext): Promise<void> {
    this.agent = agent;
    this.context = context;
    const list = typeof this.options.rendezvous === 'string' ? [this.options.rendezvous] : this.options.rendezvous;
    this.rendezvous = new RendezvousClient(agent, list, () => this.controlLost());
    const dialQuic = (url: string, peer: AgentId, signal: AbortSignal): Promise<Channel> =>
      this.options.quic.dial(new URL(url), { ...this.context, expectedPeer: peer, signal });
    const punchTimeoutMs = this.options.punchTimeoutMs ?? 3000;
    const predictPorts = this.options.predictPorts ?? 8;
    this.puncher = new Puncher(this.rendezvous, dialQuic, { timeoutMs: punchTimeoutMs, predictPorts }, { id: agent.id, nat: () => this.discovery?.type, publicIp: () => this.discovery?.mapped?.host });
    this.relayPath = new RelayPath(this.rendezvous, context, this.closing.signal);
    this.strategy = new PathStrategy(agent, context, this.puncher, this.relayPath, dialQuic, () => this.discovery, this.reportPath, this.closing.signal, {
      paths: this.options.paths ?? ['direct', 'punch', 'relay'],
      directTimeoutMs: this.options.directTimeoutMs ?? 1500,
      upgradeIntervalMs: this.options.upgradeIntervalMs ?? 10_000,
      relayHeadStartMs: this.options.relayHeadStartMs ?? 200,
    });
    agent.handle('nat.punch', (request: PunchRequest, ctx) => {
      this.fromRendezvous(ctx.peer);
      void this.answerPunch(request);
      return { ok: true };
    });
    agent.handleTunnel('nat.relay', (body: unknown, ctx) => {
      this.fromRendezvous(ctx.peer);
      const from = typeof body === 'object' && body !== null ? (body as { from?: unknown }).from : undefined;
      if (!isAgentId(from)) throw new AgentError('INVALID_ARGUMENT', "nat.relay's from must be an AgentId");
      // Refused with RESOURCE_EXHAUSTED past MAX_ACCEPTED_RELAYS; the place is held from here, and given back if
      // the tunnel never opens (core aborts ctx.signal then).
      const place = this.relayPath.admission.admit();
      let opened = false;
      ctx.signal.addEventListener('abort', () => opened || place(), { once: true });
      return {
        accept: true,
        onOpen: (stream: ChannelStream) => {
          opened = true;
          void this.relayPath.accept(stream, from, ctx.peer, place);
        },
      };
    });
    const endpoint = await this.options.quic.endpoint();
    if (!endpoint) throw new AgentError('INVALID_ARGUMENT', 'reach() needs the agent to listen on its quic() channel (port 0 is fine)');
    this.localPort = endpoint.localPort;
    this.stun = new StunClient(endpoint);
    await this.register();
    this.heartbeat = setInterval(() => this.register().catch((e: unknown) => this.report(toAgentError(e))), this.heartbeatMs).unref();
  }

  async close(): Promise<void> {
    this.closing.abort(new AgentError('CLOSED', 'agent closed'));
    clearInterval(this.heartbeat);
    clearTimeout(this.reregister);
    this.strategy?.close();
  }

  /**
   * Learns the NAT (again: mappings change), then signs and registers this agent's record with the first
   * rendezvous that takes it (the one in use, else the next).
   */
  register(): Promise<PeerRecord> {
    // One registration at a time: a heartbeat that overlapped the one a lost channel started would race it, and
    // whichever signed first would arrive second and be refused as a replay.
    this.registering ??= this.registerOnce().finally(() => (this.registering = undefined));
    return this.registering;
  }

  private async registerOnce(): Promise<PeerRecord> {
    let registered: PeerRecord | undefined;
    await this.rendezvous.publishWith(async (servers: HostPort[]) => {
      const found = await discoverNat(this.stun!, servers, this.localPort);
      const { discovery, kept } = settleDiscovery(this.discovery, found, this.unansweredInARow);
      this.unansweredInARow = found.mapped === undefined ? this.unansweredInARow + 1 : 0;
      const asked = servers.map((h) => `${urlHost(h.host)}:${h.port}`).join(', ');
      if (kept) this.report(new AgentError('UNAVAILABLE', `no STUN answer from the rendezvous (${asked}): registering with the NAT type and mapping learned before`));
      else if (found.mapped === undefined && this.discovery !== undefined && this.discovery.type !== 'unknown') {
        this.report(new AgentError('UNAVAILABLE', `no STUN answer from the rendezvous (${asked}) ${this.unansweredInARow} times in a row: registering as unknown, without the mapping learned before`));
      }
      this.discovery = discovery;
      this.seq = Math.max(this.seq + 1, Date.now());
      const mapped = this.discovery.mapped ? [quicUrl(this.discovery.mapped)] : [];
      registered = {
        agentId: this.agent.id,
        candidates: [...new Set([...mapped, ...this.listenCandidates()])],
        nat: this.discovery.type,
        portDelta: this.discovery.portDelta,
        seq: this.seq,
        expiresAt: Date.now() + 3 * this.heartbeatMs,
      };
      return signRecord(this.agent.identity, registered);
    });
    this.emit('registered', registered!);
    return registered!;
  }

  /** The pool asks for a channel to a peer it has no address for (or whose addresses failed). */
  async connect(peer: AgentId, signal: AbortSignal): Promise<Channel | undefined> {
    if (this.rendezvous.isRendezvous(peer)) return undefined;
    this.connectTimes.start(peer);
    const theirs = await this.rendezvous.resolve(peer, signal);
    return this.strategy.connect(peer, theirs, signal);
  }

  /**
   * When the control channel to our rendezvous closes (the instance stopped or failed), register again soon,
   * elsewhere if need be, rather than wait for the next heartbeat. The delay is spread over half a heartbeat so
   * that the agents of a failed instance do not all arrive at the next one in the same instant.
   */
  private controlLost(): void {
    if (this.closing.signal.aborted) return;
    clearTimeout(this.reregister);
    this.reregister = setTimeout(() => this.register().catch((e: unknown) => this.report(toAgentError(e))), Math.random() * (this.heartbeatMs / 2)).unref();
  }

  /** The rendezvous says a peer is punching towards us: dial it back at once, from the same socket. */
  private async answerPunch(request: PunchRequest): Promise<void> {
    try {
      const channel = await this.puncher.answer(request, this.closing.signal);
      if (channel) this.strategy.punchedFromPeer(channel);
    } catch (error) {
      this.report(toAgentError(error));
    }
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

  private readonly reportPath = (peer: AgentId, path: ChannelPath, channel: Channel): void => {
    this.emit('path', { peer, path, kind: channel.kind, ms: this.connectTimes.since(peer) });
  };

  /** Background failures (a heartbeat, a punch the peer asked for) go to `error` listeners, if there are any. */
  private report(error: AgentError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }

  private fromRendezvous(caller: AgentId): void {
    if (!this.rendezvous.isRendezvous(caller)) throw new AgentError('UNAUTHENTICATED', 'only the rendezvous may ask this');
  }

  /**
   * A QUIC channel a peer opened to us while we punch towards it came through the punch (either side may end up
   * keeping the other's dial): the agent asks as the channel enters its pool.
   */
  pathOf(channel: Channel): ChannelPath | undefined {
    if (channel.kind !== 'quic' || !this.puncher?.isPunching(channel.peer)) return undefined;
    // Reported once it is in the pool (the agent adds it right after asking), as our own punch's channel is.
    queueMicrotask(() => this.strategy.punchedArrived(channel));
    return 'punched';
  }
}

/** Per-option validation (as core's options helpers do): an integer in [min, max], or absent. */
function checkInteger(name: string, value: number | undefined, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (value === undefined) return;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new AgentError('INVALID_ARGUMENT', `${name} must be an integer in [${min}, ${max}], got ${String(value)}`);
  }
}

function quicUrl({ host, port }: HostPort): string {
  return `quic://${urlHost(host)}:${port}`;
}

/** NAT traversal for an agent: `createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous, quic: q })] })`. */
export function reach(options: ReachOptions): Reach {
  return new Reach(options);
}
