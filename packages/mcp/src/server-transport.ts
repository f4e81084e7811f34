import { AgentError, type Agent, type CallContext } from '@agentlink/core';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { DEFAULT_MCP_METHOD } from './client-transport.js';
import { watchRequestHandlers } from './handler-watch.js';
import { encodeMessage, isResponse, readMessages } from './json-rpc.js';
import { MAX_UNSENT_MCP_BYTES, MAX_UNSENT_MCP_MESSAGES } from './limits.js';
import { cancelledIdOf, MAX_MCP_REQUESTS_IN_FLIGHT, PeerRequests, RequestsInFlight, requestIdOf } from './requests-in-flight.js';

/** What the SDK's `Server` and `McpServer` both offer: connecting one transport. */
export interface McpServerLike {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

export interface ServeMcpOptions {
  /** The method to serve (default `mcp`). */
  method?: string;
}

/**
 * The caller's identity as MCP's `authInfo`: `clientId` is its AgentId, proven by the channel's mutual TLS
 * (there is no bearer token: `token` is empty). Tool handlers read it as `extra.authInfo.clientId`.
 */
export function authInfoOf(context: CallContext): AuthInfo {
  return { token: '', clientId: context.peer, scopes: [], extra: { agentId: context.peer, remoteAddress: context.remoteAddress } };
}

type Outgoing = { message: string; written(): void };

/**
 * An MCP server transport for one duplex call: messages from the caller reach `onmessage` with `authInfo`;
 * `send` resolves once the message left within the stream's window (backpressure from a slow client). While
 * more than {@link MAX_UNSENT_MCP_BYTES} or {@link MAX_UNSENT_MCP_MESSAGES} wait to be sent, the caller's
 * messages are not read: a client that asks and never reads the answers stalls itself, not the server's memory.
 * At most {@link MAX_MCP_REQUESTS_IN_FLIGHT} of its requests are worked on at once; more are answered at once
 * with an error.
 */
export class AgentlinkServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  private readonly queue: Outgoing[] = [];
  private wake: (() => void) | undefined;
  /** Characters of the queued messages and the one being written (released once the write took it). */
  private unsentChars = 0;
  /** The reader waits here while too much is unsent. */
  private roomForReading: (() => void) | undefined;
  private closed = false;
  private readonly extra: MessageExtraInfo;
  private readonly inFlight: RequestsInFlight;

  /**
   * `peers`, shared by the sessions of one server (`serveMcp` does this), bounds the caller's requests over all its
   * sessions, counting the handlers of closed sessions that run on (a tool that ignores its abort signal).
   */
  constructor(
    private readonly incoming: AsyncIterable<string>,
    context: CallContext,
    peers?: PeerRequests,
  ) {
    this.extra = { authInfo: authInfoOf(context) };
    this.inFlight = new RequestsInFlight(peers && { peers, peer: context.peer });
  }

  async start(): Promise<void> {
    void this.readRequests();
  }

  /**
   * Counts each request until its handler on `server` (the SDK's `Server` or `McpServer`) returns, even once the
   * client cancelled it (`serveMcp` does this). Without it a cancelled request's slot is free at once, while a
   * handler that ignores its abort signal may run on. Returns whether `server`'s handlers could be watched.
   */
  watchHandlersOf(server: object): boolean {
    const watched = watchRequestHandlers(
      server,
      (id) => this.inFlight.started(id),
      (id) => this.inFlight.ended(id),
    );
    if (watched) this.inFlight.watchHandlers();
    return watched;
  }

  /** Requests of the client being worked on now (answered or cancelled ones whose handler returned are not). */
  get requestsInFlight(): number {
    return this.inFlight.size;
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new AgentError('CLOSED', 'the MCP session is closed'));
    if (isResponse(message)) this.inFlight.settled(message.id);
    return this.enqueue(encodeMessage(message));
  }

  private enqueue(text: string): Promise<void> {
    this.unsentChars += text.length;
    return new Promise((written) => {
      this.queue.push({ message: text, written });
      this.wakeWriter();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.inFlight.close();
    this.wakeWriter();
    this.wakeReader();
    this.onclose?.();
  }

  /** The duplex handler's output: each queued message, until the session closes. */
  async *outgoing(): AsyncGenerator<string, void, undefined> {
    try {
      for (;;) {
        const next = this.queue.shift();
        if (next) {
          yield next.message;
          next.written(); // the generator resumes once the write took the message
          this.unsentChars -= next.message.length;
          if (!this.tooMuchUnsent()) this.wakeReader();
          continue;
        }
        if (this.closed) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      await this.close(); // the call ended (caller cancelled, deadline, channel lost): the session is over
    }
  }

  private wakeWriter(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private tooMuchUnsent(): boolean {
    return this.unsentChars > MAX_UNSENT_MCP_BYTES || this.queue.length >= MAX_UNSENT_MCP_MESSAGES;
  }

  /** Before the next message is read: waits while the answers already due wait for the client to read them. */
  private room(): Promise<void> | undefined {
    if (this.closed || !this.tooMuchUnsent()) return undefined;
    return new Promise((resolve) => (this.roomForReading = resolve));
  }

  private wakeReader(): void {
    const wake = this.roomForReading;
    this.roomForReading = undefined;
    wake?.();
  }

  /** A message from the client, to the SDK unless it is a request over the in-flight bound (answered here). */
  private receive(message: JSONRPCMessage): void {
    const id = requestIdOf(message);
    const refused = id === undefined ? undefined : this.inFlight.take(id);
    if (refused) {
      this.enqueue(encodeMessage(refused)).catch(() => undefined);
      return;
    }
    const cancelled = cancelledIdOf(message);
    if (cancelled !== undefined) this.inFlight.cancelled(cancelled);
    this.onmessage?.(message, this.extra);
  }

  private async readRequests(): Promise<void> {
    try {
      await readMessages(
        this.incoming,
        (message) => this.receive(message),
        (error) => this.onerror?.(error),
        () => this.room(),
      );
    } catch (error) {
      if (!this.closed) this.onerror?.(error as Error);
    }
    await this.close(); // the client ended its side or cancelled
  }
}

/**
 * Serves MCP on `agent`: each duplex call to `method` is one MCP session, connected to a server made by
 * `createServer` (an `McpServer` or `Server`, one per session, as the SDK requires). The caller's proven
 * AgentId reaches every request handler as `extra.authInfo.clientId`.
 */
export function serveMcp(agent: Agent, createServer: (context: CallContext) => McpServerLike | Promise<McpServerLike>, options: ServeMcpOptions = {}): void {
  const peers = new PeerRequests(); // each caller's requests over all its sessions (MAX_MCP_REQUESTS_IN_FLIGHT)
  agent.handleDuplex<string, string>(options.method ?? DEFAULT_MCP_METHOD, async function* (incoming, context) {
    const transport = new AgentlinkServerTransport(incoming, context, peers);
    const server = await createServer(context);
    transport.watchHandlersOf(server);
    await server.connect(transport);
    try {
      yield* transport.outgoing();
    } finally {
      await server.close().catch(() => undefined);
    }
  });
}
