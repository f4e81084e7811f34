import { AgentError, type Agent, type CallOptions, type DuplexCall } from '@agentlink/core';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { encodeMessage, isResponse, readMessages } from './json-rpc.js';
import { MAX_UNSENT_MCP_BYTES, MAX_UNSENT_MCP_MESSAGES } from './limits.js';
import { cancelledIdOf, MAX_MCP_REQUESTS_IN_FLIGHT, RequestsInFlight, requestIdOf } from './requests-in-flight.js';

export const DEFAULT_MCP_METHOD = 'mcp';

export interface McpClientTransportOptions extends CallOptions {
  /** The method the server's `serveMcp` serves (default `mcp`). */
  method?: string;
}

/**
 * An MCP client transport over one agentlink duplex call: `new Client(...).connect(new AgentlinkClientTransport(
 * agent, peer))` reaches an MCP server by AgentId on any channel (or through a NAT plugin). The session lives
 * as long as the call: `close()` cancels it, and the server's end or failure closes the transport.
 */
export class AgentlinkClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  private call: DuplexCall<string, string> | undefined;
  private closed = false;
  /** Answers to the server's requests not yet taken by the stream: characters and messages. */
  private unsentAnswerChars = 0;
  private unsentAnswers = 0;
  private readonly inFlight = new RequestsInFlight();

  constructor(
    private readonly agent: Agent,
    private readonly peer: string,
    private readonly options: McpClientTransportOptions = {},
  ) {}

  async start(): Promise<void> {
    if (this.call) throw new AgentError('INVALID_ARGUMENT', 'AgentlinkClientTransport already started');
    const { method = DEFAULT_MCP_METHOD, ...callOptions } = this.options;
    this.call = this.agent.duplex<string, string>(this.peer, method, callOptions);
    void this.readReplies(this.call);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.call || this.closed) throw new AgentError('CLOSED', 'the MCP transport is not open');
    if (!isResponse(message)) return this.call.send(encodeMessage(message));
    this.inFlight.settled(message.id);
    return this.sendAnswer(this.call, encodeMessage(message));
  }

  /**
   * An answer to one of the server's requests: counted while it waits for the server to read it. The bound is on
   * the answers already waiting, as the server's is (it stops reading past it): one answer larger than the bound,
   * to a server that reads, goes out (a sampling result of over 1 MiB closed an honest session).
   */
  private async sendAnswer(call: DuplexCall<string, string>, text: string): Promise<void> {
    if (this.unsentAnswerChars > MAX_UNSENT_MCP_BYTES || this.unsentAnswers >= MAX_UNSENT_MCP_MESSAGES) {
      const error = new AgentError(
        'RESOURCE_EXHAUSTED',
        `the MCP server does not read the answers to its requests (${this.unsentAnswers} unsent, ${this.unsentAnswerChars} characters; ` +
          `at most ${MAX_UNSENT_MCP_MESSAGES} and ${MAX_UNSENT_MCP_BYTES} wait)`,
      );
      this.fail(error);
      throw error;
    }
    this.unsentAnswerChars += text.length;
    this.unsentAnswers++;
    try {
      await call.send(text);
    } finally {
      this.unsentAnswerChars -= text.length;
      this.unsentAnswers--;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.call?.abort(new AgentError('CANCELLED', 'MCP client closed the session'));
    this.finish();
  }

  private async readReplies(call: DuplexCall<string, string>): Promise<void> {
    try {
      await readMessages(
        call,
        (message) => this.receive(call, message),
        (error) => this.onerror?.(error),
      );
    } catch (error) {
      if (!this.closed) this.onerror?.(error as Error);
    }
    this.finish();
  }

  /** A message from the server, to the SDK unless it is a request over the in-flight bound (answered here). */
  private receive(call: DuplexCall<string, string>, message: JSONRPCMessage): void {
    const id = requestIdOf(message);
    const refused = id === undefined ? undefined : this.inFlight.take(id);
    if (refused) {
      this.sendAnswer(call, encodeMessage(refused)).catch(() => undefined);
      return;
    }
    const cancelled = cancelledIdOf(message);
    if (cancelled !== undefined) this.inFlight.cancelled(cancelled);
    this.onmessage?.(message);
  }

  /** Ends the session because of the server: the call is cancelled with `error`, which the client also sees. */
  private fail(error: AgentError): void {
    if (this.closed) return;
    this.call?.abort(error);
    this.onerror?.(error);
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}
