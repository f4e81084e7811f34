import { AgentError, toAgentError } from '../errors.js';
import type { Channel, ChannelPath, ChannelStream, ListenContext, Listener, Transport, TransportContext } from '../channel.js';
import { diagnosticChannels } from '../diagnostics.js';
import { refusalKey, type Refusal } from '../listener/refusal.js';
import { integerInRange, MAX_TIMER_MS, nonNegativeInteger, positiveInteger } from '../util/options.js';
import type { AgentId } from '../identity/agent-id.js';
import { selfSignedCertificate } from '../identity/certificate.js';
import { Identity } from '../identity/identity.js';
import { DEFAULT_MAX_FRAME_SIZE } from '../wire/codec.js';
import type { CallMode } from '../wire/messages.js';
import { networkDispatch } from './call-attempt.js';
import { StreamItems, UnaryResult } from './call-results.js';
import { ItemIterator } from './item-iterator.js';
import { CallLifecycle } from './call-lifecycle.js';
import { ChannelPool, type PoolLimits, type PoolStats } from './channel-pool.js';
import type { DuplexHandler, HandlerEntry, StreamHandler, UnaryHandler } from './handlers.js';
import { DuplexReplies, DuplexSession, type DuplexCall } from './duplex.js';
import { createOutbox } from './duplex-outbox.js';
import { failServedCall, serveCall, serveInboundStream, type InboundDeps } from './inbound-call.js';
import { ConnectionGate, type AuthorizePeer } from './connection-gate.js';
import { ChannelBudgets, type ByteBudget } from './byte-budget.js';
import { composeInterceptors, dispatchCatching, failingItsCall, type CallHandler, type CallInfo, type Dispatch, type Interceptor } from './interceptor.js';
import { OutboundCall, type CallOptions } from './outbound-call.js';
import { AddressBook, formatPeerAddress, parsePeerReference } from './peer-address.js';
import { PeerDialer } from './peer-dialer.js';
import { pingChannel } from './ping.js';
import type { AgentPlugin } from './plugin.js';
import { MAX_TUNNEL_ACCEPTANCE_BYTES, openTunnel, type TunnelOptions } from './tunnel.js';
import type { TunnelHandler } from './handlers.js';

const RESOLVED_PEER_CACHE = 4096;

/** The pool now, and the peers this agent turned away. */
export interface AgentStats extends PoolStats {
  /** Refusals counted by `stage:reason`, e.g. `{ 'connection:ip-rate': 3, 'authorization:gate': 1 }`. */
  refusals: Record<string, number>;
}

/** Options of {@link createAgent}: its identity, channels, limits, interceptors and plugins. */
export interface AgentOptions extends PoolLimits {
  /** The agent's key; a new one is generated when omitted (see loadOrCreateIdentity to persist it). */
  identity?: Identity;
  /** The channel kinds this agent listens on and dials with, in order of preference, e.g. `[quic(), webSocket()]`. */
  channels: readonly Transport[];
  /** Peers known up front, as `<AgentId>@<url>`. */
  peers?: readonly string[];
  /** Largest frame accepted or sent (default 16 MiB). */
  maxFrameSize?: number;
  /** Deadline of `send` calls that set none (default 30 s). `stream` calls have none unless given. */
  defaultTimeoutMs?: number;
  /** Upper bound for opening a channel to a peer (default 10 s). */
  connectTimeoutMs?: number;
  /** Wrap every outgoing call, first = outermost: e.g. `[metrics.interceptor, retry(), circuitBreaker()]`. */
  interceptors?: readonly Interceptor[];
  /** Other ways to reach peers, e.g. `reach({ rendezvous })` from `@agentlink/nat`. */
  plugins?: readonly AgentPlugin[];
  /**
   * Wrap every call this agent serves, first = outermost, with the lifecycle outgoing calls have (`call.direction`
   * is `inbound`, `call.peer` the caller): e.g. `[metrics.inboundInterceptor, rateLimit({ perPeer })]`. An
   * interceptor refuses a call by reporting `onError` (e.g. PERMISSION_DENIED) instead of passing it on.
   */
  inboundInterceptors?: readonly Interceptor[];
  /**
   * The connection gate: asked once per channel, before any of its streams is served. A refused peer's channel is
   * closed with PERMISSION_DENIED (on a channel we dialled, its calls back to us are refused).
   */
  authorizePeer?: AuthorizePeer;
  /** Shorthand gate: only these AgentIds may call this agent (with `authorizePeer`, both must allow). */
  allowPeers?: Iterable<AgentId>;
  /** A stream's request must arrive whole within this many milliseconds, or the stream is reset (default 10 s). */
  requestTimeoutMs?: number;
  /**
   * Bytes of unfinished inbound frames one channel may make this agent hold (default 32 MiB, at least twice
   * maxFrameSize); past it the stream holding most is reset with RESOURCE_EXHAUSTED.
   */
  maxInboundBytesPerChannel?: number;
  /** The same across all channels of the agent (default 256 MiB, at least maxInboundBytesPerChannel). */
  maxInboundBytes?: number;
  /**
   * Bytes of replies (items, responses) one channel's peer leaves unread while this agent serves it: the items
   * its handlers yielded that wait for the peer's flow-control credit (default 32 MiB, at least twice
   * maxFrameSize); past it the stream holding most is reset with RESOURCE_EXHAUSTED.
   */
  maxStalledReplyBytesPerChannel?: number;
  /** The same across all channels of the agent (default 256 MiB). */
  maxStalledReplyBytes?: number;
}

const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** A deadline option: milliseconds ≥ 0, or Infinity for none. */
function nonNegativeNumberOrInfinity(name: string, value: number | undefined, fallback: number): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  return nonNegativeInteger(name, value, fallback);
}
const DEFAULT_INBOUND_BYTES_PER_CHANNEL = 32 * 1024 * 1024;
const DEFAULT_INBOUND_BYTES = 256 * 1024 * 1024;



/** The path new calls to a peer take now. */
export interface PathInfo {
  path: ChannelPath;
  kind: string;
  remoteAddress: string;
  /** Round trip measured now over that channel, in milliseconds. */
  rttMs: number;
}

/**
 * An agent: an identity, handlers for the methods it serves, and calls to other agents by their AgentId.
 * Channels are opened, reused and closed for the caller; the API is the same on every channel kind.
 */
export class Agent {
  readonly identity: Identity;
  private readonly handlers = new Map<string, HandlerEntry>();
  private readonly addressBook = new AddressBook();
  private readonly resolvedPeers = new Map<string, AgentId>();
  private readonly pool: ChannelPool;
  private readonly dispatch: Dispatch;
  private readonly maxFrameSize: number;
  /** What serving a stream needs from the agent: one object for every stream served. */
  private readonly inboundDeps: InboundDeps;
  private readonly defaultTimeoutMs: number;
  private listeners: Listener[] = [];
  /** Peers turned away, by `stage:reason` (see listener/refusal.ts). */
  private readonly refusals = new Map<string, number>();
  private readonly gate: ConnectionGate;
  /**
   * What every channel gets from the agent, the dialer and the listeners alike: one certificate (a DER encoding and
   * an Ed25519 signature, ~0.9 ms) and so one shared TLS context per agent, not one for dialling and one for listening.
   */
  private readonly transport: TransportContext;
  private closedReason: AgentError | undefined;

  private constructor(private readonly options: AgentOptions) {
    this.identity = options.identity ?? Identity.generate();
    this.transport = {
      identity: this.identity,
      tls: selfSignedCertificate(this.identity),
      onStream: (stream: ChannelStream, channel: Channel) => this.serve(stream, channel),
      onRefused: (refusal: Refusal) => this.refused(refusal),
    };
    this.maxFrameSize = positiveInteger('maxFrameSize', options.maxFrameSize, DEFAULT_MAX_FRAME_SIZE);
    const perChannel = positiveInteger('maxInboundBytesPerChannel', options.maxInboundBytesPerChannel, Math.max(DEFAULT_INBOUND_BYTES_PER_CHANNEL, 2 * this.maxFrameSize));
    const total = positiveInteger('maxInboundBytes', options.maxInboundBytes, Math.max(DEFAULT_INBOUND_BYTES, perChannel));
    const evicted = (reason: string) => (channel: Channel, error: AgentError): void =>
      this.refused({ stage: 'stream', reason, kind: channel.kind, remoteAddress: channel.remoteAddress, peer: channel.peer, code: error.code, detail: error.message });
    const inboundBudgets = new ChannelBudgets(perChannel, total, 'unfinished frames', evicted('budget'));
    const budget = (channel: Channel): ByteBudget => inboundBudgets.for(channel);
    const stalledPerChannel = positiveInteger('maxStalledReplyBytesPerChannel', options.maxStalledReplyBytesPerChannel, Math.max(DEFAULT_INBOUND_BYTES_PER_CHANNEL, 2 * this.maxFrameSize));
    const stalledTotal = positiveInteger('maxStalledReplyBytes', options.maxStalledReplyBytes, Math.max(DEFAULT_INBOUND_BYTES, stalledPerChannel));
    const replyBudgets = new ChannelBudgets(stalledPerChannel, stalledTotal, 'replies the peer does not read', evicted('stalled-replies'));
    this.gate = new ConnectionGate(options, (refusal) => this.refused(refusal));
    const inbound = options.inboundInterceptors ?? [];
    this.inboundDeps = {
      maxFrameSize: this.maxFrameSize,
      requestTimeoutMs: integerInRange('requestTimeoutMs', options.requestTimeoutMs, DEFAULT_REQUEST_TIMEOUT_MS, 1, MAX_TIMER_MS),
      handler: (method) => this.handlers.get(method),
      budget,
      replyBudget: (channel) => replyBudgets.for(channel),
      refused: (refusal) => this.refused(refusal),
      used: (channel) => this.pool.touch(channel),
      dispatch: inbound.length > 0 ? composeInterceptors(inbound.map((i) => failingItsCall(i, failServedCall)), serveCall) : undefined,
    };
    this.defaultTimeoutMs = nonNegativeNumberOrInfinity('defaultTimeoutMs', options.defaultTimeoutMs, 30_000);
    integerInRange('connectTimeoutMs', options.connectTimeoutMs, 10_000, 1, MAX_TIMER_MS); // a timer's delay: within node's range
    const dialer = new PeerDialer({
      transports: options.channels,
      addresses: this.addressBook,
      context: this.transport,
      connectTimeoutMs: options.connectTimeoutMs,
      connectors: (options.plugins ?? []).flatMap((p) => (p.connect ? [(peer: AgentId, signal: AbortSignal) => p.connect!(peer, signal)] : [])),
    });
    this.pool = new ChannelPool({
      ...options,
      dialer,
      self: this.identity.id,
      ping: (channel, timeoutMs) => pingChannel(channel, this.maxFrameSize, timeoutMs),
    });
    this.dispatch = composeInterceptors((options.interceptors ?? []).map((i) => failingItsCall(i, failCall)), networkDispatch({ pool: this.pool, maxFrameSize: this.maxFrameSize, budget }));
    for (const peer of options.peers ?? []) this.addPeer(peer);
  }

  /** Creates an agent and starts listening on every channel that has a listen address. */
  static async create(options: AgentOptions): Promise<Agent> {
    if (options.channels.length === 0) throw new AgentError('INVALID_ARGUMENT', 'an agent needs at least one channel');
    const agent = new Agent(options);
    const context: ListenContext = { ...agent.transport, onChannel: (channel: Channel, path?: ChannelPath) => agent.accept(channel, path) };
    try {
      for (const transport of options.channels) agent.listeners.push(await transport.listen(context));
      for (const plugin of options.plugins ?? []) await plugin.start?.(agent, context);
    } catch (error) {
      await agent.close();
      throw error;
    }
    return agent;
  }

  get id(): AgentId {
    return this.identity.id;
  }

  /** Where peers can reach this agent, each as `<AgentId>@<url>`; pass one to another agent's `send`. */
  get addresses(): string[] {
    return this.listeners.flatMap((l) => l.addresses.map((url) => formatPeerAddress(this.id, url)));
  }

  /** Serves `method` with a function returning one result. */
  handle<In = any, Out = unknown>(method: string, handler: UnaryHandler<In, Out>): this {
    this.handlers.set(method, { kind: 'unary', handler });
    return this;
  }

  /** Serves `method` with an async generator; each yielded value reaches the caller's `for await`. */
  handleStream<In = any, Out = unknown>(method: string, handler: StreamHandler<In, Out>): this {
    this.handlers.set(method, { kind: 'stream', handler });
    return this;
  }

  /**
   * Serves `method` as a duplex call: the handler iterates the caller's items (`incoming`) and yields its own,
   * in any interleaving. Callers open one with `duplex`.
   */
  handleDuplex<In = any, Out = unknown>(method: string, handler: DuplexHandler<In, Out>): this {
    this.handlers.set(method, { kind: 'duplex', handler });
    return this;
  }

  /**
   * Serves `method` as a tunnel: the handler accepts (or throws to refuse) and then owns a raw byte stream to
   * the caller, e.g. to relay it. Callers open one with `openTunnel`.
   */
  handleTunnel<In = any>(method: string, handler: TunnelHandler<In>): this {
    this.handlers.set(method, { kind: 'tunnel', handler });
    return this;
  }

  /**
   * Opens a raw byte stream to `peer`'s tunnel handler for `method`; resolves once the handler accepted, with
   * what it answered. Tunnels do not pass through interceptors; `timeoutMs` and `signal` bound the opening, and
   * `maxAcceptBytes` (default 64 KiB) the answer.
   */
  async openTunnel(peer: string, method: string, body?: unknown, options: TunnelOptions = {}): Promise<{ stream: ChannelStream; accepted: unknown }> {
    const { maxAcceptBytes = MAX_TUNNEL_ACCEPTANCE_BYTES, ...callOptions } = options;
    checkAcceptBytes(maxAcceptBytes);
    const call = this.newCall(peer, method, body, 'tunnel', callOptions, this.defaultTimeoutMs);
    try {
      return await openTunnel(this.pool, call, this.maxFrameSize, Math.min(maxAcceptBytes, this.maxFrameSize));
    } finally {
      call.finish();
    }
  }

  /** Which path new calls to `peer` take (direct, punched or relay), over which channel kind, and its RTT now. */
  async pathTo(peer: string, options: Pick<CallOptions, 'signal' | 'timeoutMs'> = {}): Promise<PathInfo> {
    const id = this.resolvePeer(peer);
    let channel = this.pool.preferred(id);
    if (!channel) {
      channel = await this.pool.reserve(id, 'critical', options.signal);
      this.pool.release(channel);
    }
    const rttMs = await pingChannel(channel, this.maxFrameSize, options.timeoutMs ?? this.defaultTimeoutMs, options.signal);
    return { path: channel.path ?? 'direct', kind: channel.kind, remoteAddress: channel.remoteAddress, rttMs };
  }

  /** Remembers where a peer can be reached (`<AgentId>@<url>`); returns its AgentId. */
  addPeer(address: string): AgentId {
    const { id, url } = parsePeerReference(address);
    if (url) this.addressBook.add(id, url);
    return id;
  }

  /** Calls `method` on `peer` (an AgentId or `<AgentId>@<url>`) and resolves with its result. */
  send<Out = unknown>(peer: string, method: string, body?: unknown, options: CallOptions = {}): Promise<Out> {
    let call: OutboundCall;
    try {
      call = this.newCall(peer, method, body, 'unary', options, this.defaultTimeoutMs);
    } catch (error) {
      return Promise.reject(error);
    }
    const result = new UnaryResult<Out>();
    this.start(call, result);
    return result.promise;
  }

  /**
   * Calls a streaming `method` and yields each item as it arrives. Breaking out of the loop, aborting the signal
   * or passing the deadline cancels the remote generator; a slow loop slows the producer (backpressure).
   */
  stream<Out = unknown>(peer: string, method: string, body?: unknown, options: CallOptions = {}): AsyncGenerator<Out, void, undefined> {
    // As an `async *` method would: the call starts at the first `next()`, and a bad argument rejects that.
    let call: OutboundCall | undefined;
    let items: StreamItems<Out> | undefined;
    return new ItemIterator<Out>(
      () => {
        call = this.newCall(peer, method, body, 'stream', options, undefined);
        const started = call;
        items = new StreamItems<Out>(() => started.abortReason);
        this.start(call, items);
        return items;
      },
      () => {
        call!.abort(new AgentError('CANCELLED', 'caller stopped reading the stream'));
        items!.unhold();
      },
    );
  }

  /**
   * Opens a duplex call to `peer`'s `handleDuplex` handler: `send` items (with backpressure) and `end()`, while
   * `for await` reads the handler's items. Deadline (none unless `timeoutMs`), signal, priority, metadata and
   * interceptors apply as for `stream`; breaking out of the loop or `abort(reason)` cancels both sides.
   */
  duplex<In = unknown, Out = unknown>(peer: string, method: string, options: CallOptions = {}): DuplexCall<In, Out> {
    const call = this.newCall(peer, method, null, 'duplex', options, undefined);
    const outbox = createOutbox(call);
    const replies = new DuplexReplies<Out>(() => call.abortReason, outbox, method);
    this.start(call, replies);
    return new DuplexSession<In, Out>(call, replies, outbox);
  }

  /** Round-trip time in milliseconds to `peer` over the channel calls would use. */
  async ping(peer: string, options: Pick<CallOptions, 'signal' | 'timeoutMs'> = {}): Promise<number> {
    const id = this.resolvePeer(peer);
    const timeoutMs = options.timeoutMs ?? this.defaultTimeoutMs;
    const channel = await this.pool.reserve(id, 'critical', options.signal);
    try {
      return await pingChannel(channel, this.maxFrameSize, timeoutMs, options.signal);
    } finally {
      this.pool.release(channel);
    }
  }

  /** The pool now: channels (kind, calls in flight, health-check RTT) and calls waiting, by priority. */
  stats(): AgentStats {
    return { ...this.pool.stats(), refusals: Object.fromEntries(this.refusals) };
  }

  /** Open channels, to one peer or to all. */
  channels(peer?: string): Channel[] {
    return this.pool.list(peer === undefined ? undefined : parsePeerReference(peer).id);
  }

  /** Stops listening, closes every channel (open calls fail with CLOSED) and releases every handle. */
  async close(): Promise<void> {
    if (this.closedReason) return;
    this.closedReason = new AgentError('CLOSED', 'agent closed');
    await Promise.all((this.options.plugins ?? []).map((p) => p.close?.()));
    // Channels first, so calls in flight fail with CLOSED (not with whatever a listener's teardown causes).
    await this.pool.close(this.closedReason);
    const listeners = this.listeners;
    this.listeners = [];
    await Promise.all(listeners.map((l) => l.close()));
    await Promise.all(this.options.channels.map((t) => t.close?.()));
  }

  /** Every refusal leaves a trace: a diagnostics event and a counter (CallMetrics exports it). */
  private refused(refusal: Refusal): void {
    const key = refusalKey(refusal);
    this.refusals.set(key, (this.refusals.get(key) ?? 0) + 1);
    if (diagnosticChannels.peerRefused.hasSubscribers) diagnosticChannels.peerRefused.publish(refusal);
  }

  /** A channel a peer opened to us: through the gate, then into the pool (its calls back use it too). */
  private accept(channel: Channel, path?: ChannelPath): void {
    // Its path is known before the pool sees it (the pool retires relays when a direct path arrives).
    const known = path ?? channel.path ?? this.pathFromPlugins(channel);
    if (known !== undefined) channel.path = known;
    if (!this.gate.active) return this.pool.add(channel);
    const admit = (allowed: boolean): void => {
      if (allowed) this.pool.add(channel);
      else void channel.close(this.gate.denial(channel));
    };
    const decision = this.gate.decide(channel);
    if (typeof decision === 'boolean') admit(decision);
    else void decision.then(admit);
  }

  private pathFromPlugins(channel: Channel): ChannelPath | undefined {
    for (const plugin of this.options.plugins ?? []) {
      const path = plugin.pathOf?.(channel);
      if (path !== undefined) return path;
    }
    return undefined;
  }

    private serve(stream: ChannelStream, channel: Channel): void {
    if (this.closedReason) return stream.reset(this.closedReason);
    if (this.gate.active) {
      const decision = this.gate.decide(channel);
      if (decision === false) return stream.reset(this.gate.denial(channel));
      if (decision !== true) {
        void decision.then((allowed) => (allowed ? this.serve(stream, channel) : stream.reset(this.gate.denial(channel))));
        return;
      }
    }
    void serveInboundStream(stream, channel, this.inboundDeps); // a call (not a ping) marks the channel used
  }

  /** Parses a peer reference once; later calls with the same text skip parsing (and the address book, while it keeps the peer). */
  private resolvePeer(peer: string): AgentId {
    if (this.closedReason) throw this.closedReason;
    let id = this.resolvedPeers.get(peer);
    if (id === undefined) {
      id = this.addPeer(peer);
      if (this.resolvedPeers.size >= RESOLVED_PEER_CACHE) this.resolvedPeers.clear();
      this.resolvedPeers.set(peer, id);
    } else if (peer.length !== id.length && !this.addressBook.has(id)) {
      // Given with its address, and forgotten by the address book since (it keeps MAX_KNOWN_PEERS): learned again
      // from the text, as the first call did; skipping it left "no address known" for a call made by address.
      this.addPeer(peer);
    }
    return id;
  }

  private newCall(peer: string, method: string, body: unknown, mode: CallMode, options: CallOptions, timeoutMs: number | undefined): OutboundCall {
    return new OutboundCall(this.resolvePeer(peer), method, body, mode, options, timeoutMs);
  }

  /** Runs a call through the interceptors; the call's timers stop when it ends, either way. */
  private start(call: OutboundCall, handler: CallHandler): void {
    const observed = diagnosticChannels.callStart.hasSubscribers || diagnosticChannels.callEnd.hasSubscribers || diagnosticChannels.callError.hasSubscribers;
    const lifecycle = new CallLifecycle(call, handler, observed);
    // An interceptor that throws instead of reporting `onError` (a bug in it): the call fails with what it threw,
    // whatever it had started is cancelled, and the deadline stops. Before, `send` threw synchronously and left
    // the call's deadline timer armed (it kept the process alive), and `stream` never settled.
    dispatchCatching(this.dispatch, call, lifecycle, failCall);
    call.dispatched();
  }
}

/** What an interceptor threw, instead of reporting `onError`, fails the call: its attempt is cancelled, its handler told. */
/** `openTunnel`'s `maxAcceptBytes`: a positive integer (the frame decoder compares lengths against it). */
function checkAcceptBytes(value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) throw new AgentError('INVALID_ARGUMENT', `maxAcceptBytes must be a positive integer, got ${String(value)}`);
}

function failCall(call: CallInfo, handler: CallHandler, error: unknown): void {
  const failure = toAgentError(error, 'UNKNOWN');
  call.abort(failure);
  handler.onError(failure);
}

/** Creates an agent and starts its listeners. */
export function createAgent(options: AgentOptions): Promise<Agent> {
  return Agent.create(options);
}
