import { AgentError } from '../errors.js';
import type { Channel, ChannelStream, Listener, Transport, TransportContext } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import { selfSignedCertificate } from '../identity/certificate.js';
import { Identity } from '../identity/identity.js';
import { DEFAULT_MAX_FRAME_SIZE } from '../wire/codec.js';
import { FramedStream } from '../wire/framed-stream.js';
import type { CallMode } from '../wire/messages.js';
import { ChannelPool } from './channel-pool.js';
import type { HandlerEntry, StreamHandler, UnaryHandler } from './handlers.js';
import { serveInboundStream } from './inbound-call.js';
import { OutboundCall, type CallOptions } from './outbound-call.js';
import { AddressBook, formatPeerAddress, parsePeerReference } from './peer-address.js';

const RESOLVED_PEER_CACHE = 4096;
const MAX_TRANSPARENT_RETRIES = 5;

export interface AgentOptions {
  /** The agent's key; a new one is generated when omitted (see loadOrCreateIdentity to persist it). */
  identity?: Identity;
  /** The channel kinds this agent listens on and dials with, e.g. `[webSocket({ port: 4433 })]`. */
  channels: readonly Transport[];
  /** Peers known up front, as `<AgentId>@<url>`. */
  peers?: readonly string[];
  /** Largest frame accepted or sent (default 16 MiB). */
  maxFrameSize?: number;
  /** Deadline of `send` calls that set none (default 30 s). `stream` calls have none unless given. */
  defaultTimeoutMs?: number;
  /** Upper bound for opening a channel to a peer (default 10 s). */
  connectTimeoutMs?: number;
  /** Channels that carried no call for this long are closed (default 5 min; 0 = never). */
  idleTimeoutMs?: number;
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
  private readonly maxFrameSize: number;
  private readonly defaultTimeoutMs: number;
  private listeners: Listener[] = [];
  private closedReason: AgentError | undefined;

  private constructor(private readonly options: AgentOptions) {
    this.identity = options.identity ?? Identity.generate();
    this.maxFrameSize = options.maxFrameSize ?? DEFAULT_MAX_FRAME_SIZE;
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
    this.pool = new ChannelPool({
      transports: options.channels,
      addresses: this.addressBook,
      context: this.transportContext(),
      connectTimeoutMs: options.connectTimeoutMs,
      idleTimeoutMs: options.idleTimeoutMs,
    });
    for (const peer of options.peers ?? []) this.addPeer(peer);
  }

  /** Creates an agent and starts listening on every channel that has a listen address. */
  static async create(options: AgentOptions): Promise<Agent> {
    if (options.channels.length === 0) throw new AgentError('INVALID_ARGUMENT', 'an agent needs at least one channel');
    const agent = new Agent(options);
    const context = { ...agent.transportContext(), onChannel: (channel: Channel) => agent.pool.add(channel) };
    try {
      for (const transport of options.channels) agent.listeners.push(await transport.listen(context));
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

  /** Remembers where a peer can be reached (`<AgentId>@<url>`); returns its AgentId. */
  addPeer(address: string): AgentId {
    const { id, url } = parsePeerReference(address);
    if (url) this.addressBook.add(id, url);
    return id;
  }

  /** Calls `method` on `peer` (an AgentId or `<AgentId>@<url>`) and resolves with its result. */
  async send<Out = unknown>(peer: string, method: string, body?: unknown, options: CallOptions = {}): Promise<Out> {
    const call = new OutboundCall(method, options, this.defaultTimeoutMs);
    for (let attempt = 0; ; attempt++) {
      try {
        const framed = await this.openCall(peer, call, 'unary', body);
        const reply = await framed.receive();
        if (reply?.type === 'response') {
          call.complete();
          return reply.body as Out;
        }
        throw this.unexpectedReply(call, reply);
      } catch (error) {
        if (await this.retryUnprocessed(call, error, attempt)) continue;
        throw call.fail(error);
      }
    }
  }

  /**
   * Calls a streaming `method` and yields each item as it arrives. Breaking out of the loop, aborting the signal
   * or passing the deadline cancels the remote generator; a slow loop slows the producer (backpressure).
   */
  async *stream<Out = unknown>(peer: string, method: string, body?: unknown, options: CallOptions = {}): AsyncGenerator<Out, void, undefined> {
    const call = new OutboundCall(method, options, undefined);
    try {
      const first = await this.firstMessage(call, peer, body);
      const framed = first.framed;
      for (let message = first.message; ; message = await framed.receive()) {
        if (message?.type === 'item') {
          yield message.body as Out;
        } else if (message?.type === 'end') {
          call.complete();
          return;
        } else if (message?.type === 'response') {
          // A unary handler called as a stream: its one result is the one item.
          call.complete();
          yield message.body as Out;
          return;
        } else {
          throw this.unexpectedReply(call, message);
        }
      }
    } catch (error) {
      throw call.fail(error);
    } finally {
      if (!call.completed) call.abort(new AgentError('CANCELLED', 'caller stopped reading the stream'));
      call.dispose();
    }
  }

  /** Opens a stream call and reads its first reply, reopening it while the peer refuses it unprocessed. */
  private async firstMessage(call: OutboundCall, peer: string, body: unknown) {
    for (let attempt = 0; ; attempt++) {
      try {
        const framed = await this.openCall(peer, call, 'stream', body);
        return { framed, message: await framed.receive() };
      } catch (error) {
        if (!(await this.retryUnprocessed(call, error, attempt))) throw error;
      }
    }
  }

  /**
   * A call the peer refused before processing it (HTTP/2 REFUSED_STREAM and the like) is retried at once on a
   * fresh stream, a few times, within its deadline: it cannot run twice. Other failures are the caller's to see.
   */
  private async retryUnprocessed(call: OutboundCall, error: unknown, attempt: number): Promise<boolean> {
    if (!(error instanceof AgentError) || !error.unprocessed || call.aborted || attempt >= MAX_TRANSPARENT_RETRIES) return false;
    await new Promise((resolve) => setTimeout(resolve, attempt));
    return !call.aborted;
  }

  /** Round-trip time in milliseconds to `peer` over the channel calls would use. */
  async ping(peer: string, options: Pick<CallOptions, 'signal' | 'timeoutMs'> = {}): Promise<number> {
    const call = new OutboundCall('ping', options, this.defaultTimeoutMs);
    try {
      const channel = await this.pool.acquire(this.resolvePeer(peer), call.signal);
      const framed = new FramedStream(await channel.openStream(), this.maxFrameSize);
      call.attach(framed);
      const started = performance.now();
      const nonce = Math.floor(Math.random() * 2 ** 31);
      await framed.send({ type: 'ping', nonce });
      const reply = await framed.receive();
      if (reply?.type !== 'pong' || reply.nonce !== nonce) throw new AgentError('PROTOCOL_ERROR', 'bad pong');
      const rtt = performance.now() - started;
      call.complete();
      return rtt;
    } catch (error) {
      throw call.fail(error);
    }
  }

  /** Open channels, to one peer or to all. */
  channels(peer?: string): Channel[] {
    return this.pool.list(peer === undefined ? undefined : parsePeerReference(peer).id);
  }

  /** Stops listening, closes every channel (open calls fail with CLOSED) and releases every handle. */
  async close(): Promise<void> {
    if (this.closedReason) return;
    this.closedReason = new AgentError('CLOSED', 'agent closed');
    // Channels first, so calls in flight fail with CLOSED (not with whatever a listener's teardown causes).
    await this.pool.close(this.closedReason);
    const listeners = this.listeners;
    this.listeners = [];
    await Promise.all(listeners.map((l) => l.close()));
    await Promise.all(this.options.channels.map((t) => t.close?.()));
  }

  private transportContext(): TransportContext {
    return {
      identity: this.identity,
      tls: selfSignedCertificate(this.identity),
      onStream: (stream: ChannelStream, channel: Channel) => this.serve(stream, channel),
    };
  }

  private serve(stream: ChannelStream, channel: Channel): void {
    if (this.closedReason) return stream.reset(this.closedReason);
    this.pool.touch(channel);
    void serveInboundStream(stream, channel, {
      maxFrameSize: this.maxFrameSize,
      handler: (method) => this.handlers.get(method),
    });
  }

  /** Parses a peer reference once; later calls with the same text skip parsing and the address book. */
  private resolvePeer(peer: string): AgentId {
    if (this.closedReason) throw this.closedReason;
    let id = this.resolvedPeers.get(peer);
    if (id === undefined) {
      id = this.addPeer(peer);
      if (this.resolvedPeers.size >= RESOLVED_PEER_CACHE) this.resolvedPeers.clear();
      this.resolvedPeers.set(peer, id);
    }
    return id;
  }

  private async openCall(peer: string, call: OutboundCall, mode: CallMode, body: unknown): Promise<FramedStream> {
    const id = this.resolvePeer(peer);
    const channel = this.pool.openChannel(id) ?? (await this.pool.acquire(id, call.signal));
    const stream = await channel.openStream({ priority: call.priority });
    this.pool.touch(channel);
    const framed = new FramedStream(stream, this.maxFrameSize);
    call.attach(framed);
    await framed.send({
      type: 'request',
      method: call.method,
      timeoutMs: call.remainingMs(),
      priority: call.priority,
      metadata: call.metadata,
      body,
      mode,
    });
    return framed;
  }

  private unexpectedReply(call: OutboundCall, reply: Awaited<ReturnType<FramedStream['receive']>>): AgentError {
    if (reply?.type === 'error') {
      call.complete();
      return new AgentError(reply.code, reply.message, { remote: true });
    }
    if (reply === undefined) return new AgentError('UNAVAILABLE', `${call.method}: peer ended the stream without a reply`);
    return new AgentError('PROTOCOL_ERROR', `${call.method}: unexpected ${reply.type} from the peer`);
  }
}

/** Creates an agent and starts its listeners. */
export function createAgent(options: AgentOptions): Promise<Agent> {
  return Agent.create(options);
}
