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

interface Requests {
  /** Admitted and not yet given back. */
  admitted: number;
  /** Of them, with a handler running now (known only when handlers are watched). */
  running: number;
  /** Of the running ones, cancelled: each gives its slot back when a handler of its id returns. */
  cancelledRunning: number;
}

/**
 * The requests of one session being worked on: counted per id (a client may reuse an id; each is a handler). A
 * request's slot is given back when it is answered, or when it is cancelled — and then, where handlers are
 * watched (handler-watch.ts), only once its handler returned: a handler that ignores its abort signal runs on, and
 * a client cancelling and calling it again and again would otherwise start more than the bound.
 */
export class RequestsInFlight {
  private readonly requests = new Map<RequestId, Requests>();
  private total = 0;
  private watching = false;

  get size(): number {
    return this.total;
  }

  /** A request read from the client: false when MAX_MCP_REQUESTS_IN_FLIGHT are being worked on already. */
  admit(id: RequestId): boolean {
    if (this.total >= MAX_MCP_REQUESTS_IN_FLIGHT) return false;
    const entry = this.requests.get(id);
    if (entry) entry.admitted++;
    else this.requests.set(id, { admitted: 1, running: 0, cancelledRunning: 0 });
    this.total++;
    return true;
  }

  /** The request `id` was answered (the SDK answers once its handler returned). */
  settled(id: RequestId): void {
    this.release(id);
  }

  /** The client cancelled `id`: its slot is free now, or once its handler returns if one runs and is watched. */
  cancelled(id: RequestId): void {
    const entry = this.requests.get(id);
    if (!entry) return;
    if (this.watching && entry.running > entry.cancelledRunning) entry.cancelledRunning++;
    else this.release(id);
  }

  /** Handlers are watched from now on (`started` and `ended` are called): a cancel waits for its handler's end. */
  watchHandlers(): void {
    this.watching = true;
  }

  /** A handler of `id` started. */
  started(id: RequestId): void {
    const entry = this.requests.get(id);
    if (entry) entry.running++;
  }

  /** A handler of `id` returned or threw. */
  ended(id: RequestId): void {
    const entry = this.requests.get(id);
    if (!entry || entry.running === 0) return;
    entry.running--;
    if (entry.cancelledRunning > 0) {
      entry.cancelledRunning--;
      this.release(id);
    }
  }

  private release(id: RequestId): void {
    const entry = this.requests.get(id);
    if (!entry) return;
    entry.admitted--;
    this.total--;
    if (entry.admitted === 0) this.requests.delete(id);
    else {
      entry.running = Math.min(entry.running, entry.admitted);
      entry.cancelledRunning = Math.min(entry.cancelledRunning, entry.running);
    }
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
