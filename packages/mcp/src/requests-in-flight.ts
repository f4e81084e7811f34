import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * Requests a peer may have one MCP session work on at once (a client's on a server session, and a server's on a
 * client, which may ask for sampling or roots). The SDK starts a handler for every request it is
 * given, with no bound of its own: a client that calls a slow tool over and over holds one handler (and its
 * AbortController, its promises) per call for as long as the tool runs. Past this, a request is answered at once
 * with {@link TOO_MANY_MCP_REQUESTS} and never reaches the SDK.
 */
export const MAX_MCP_REQUESTS_IN_FLIGHT = 1024;
/** The JSON-RPC error code of that answer (in the range JSON-RPC leaves to servers). */
export const TOO_MANY_MCP_REQUESTS = -32029;

/** The requests of one session being worked on: counted per id (a client may reuse an id; each is a handler). */
export class RequestsInFlight {
  private readonly counts = new Map<RequestId, number>();
  private total = 0;

  get size(): number {
    return this.total;
  }

  /** A request read from the client: false when MAX_MCP_REQUESTS_IN_FLIGHT are being worked on already. */
  admit(id: RequestId): boolean {
    if (this.total >= MAX_MCP_REQUESTS_IN_FLIGHT) return false;
    this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    this.total++;
    return true;
  }

  /** The request `id` was answered, or cancelled (the SDK sends no answer to a cancelled request). */
  settled(id: RequestId): void {
    const count = this.counts.get(id);
    if (count === undefined) return;
    if (count === 1) this.counts.delete(id);
    else this.counts.set(id, count - 1);
    this.total--;
  }
}

/** The answer to a request refused because too many are in flight. */
export function tooManyRequests(id: RequestId): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: TOO_MANY_MCP_REQUESTS, message: `more than ${MAX_MCP_REQUESTS_IN_FLIGHT} requests in flight` } };
}

/** A request: it has a method and an id (a notification has no id). */
export function requestIdOf(message: JSONRPCMessage): RequestId | undefined {
  return 'method' in message && 'id' in message ? message.id : undefined;
}

/** The request a `notifications/cancelled` names, if `message` is one. */
export function cancelledIdOf(message: JSONRPCMessage): RequestId | undefined {
  if (!('method' in message) || 'id' in message || message.method !== 'notifications/cancelled') return undefined;
  const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}
