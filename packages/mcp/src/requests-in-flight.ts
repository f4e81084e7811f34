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
/** JSON-RPC's Invalid Request: the answer to a request whose id is in flight already in its session. */
const INVALID_REQUEST = -32600;

/**
 * Requests of each peer being worked on, over all its sessions with one server (`serveMcp`), including handlers
 * still running after their session closed: the SDK aborts them then, but a tool that ignores its abort signal
 * runs on, and a peer closing and opening sessions would otherwise start {@link MAX_MCP_REQUESTS_IN_FLIGHT} more
 * each time.
 */
export class PeerRequests {
  private readonly counts = new Map<string, number>();

  of(peer: string): number {
    return this.counts.get(peer) ?? 0;
  }

  add(peer: string, delta: number): void {
    const count = this.of(peer) + delta;
    if (count > 0) this.counts.set(peer, count);
    else this.counts.delete(peer);
  }

  /** Peers with a request being worked on (for tests). */
  get size(): number {
    return this.counts.size;
  }
}

interface Requests {
  /** Admitted and not yet given back. */
  admitted: number;
  /** Of them, with a handler running now (known only when handlers are watched). */
  running: number;
  /** Of the running ones, cancelled: each gives its slot back when a handler of its id returns. */
  cancelledRunning: number;
}

/**
 * The requests of one session being worked on, by id (one in flight per id: `take` refuses another). A
 * request's slot is given back when it is answered, or when it is cancelled — and then, where handlers are
 * watched (handler-watch.ts), only once its handler returned: a handler that ignores its abort signal runs on, and
 * a client cancelling and calling it again and again would otherwise start more than the bound.
 */
export class RequestsInFlight {
  private readonly requests = new Map<RequestId, Requests>();
  private total = 0;
  private watching = false;
  private closed = false;

  /** With `shared`, the session's requests count as `peer`'s too, and the bound holds over all its sessions. */
  constructor(private readonly shared?: { peers: PeerRequests; peer: string }) {}

  get size(): number {
    return this.total;
  }

  /**
   * A request read from the client: false when MAX_MCP_REQUESTS_IN_FLIGHT are being worked on already, in this
   * session or, with `shared`, in all the peer's sessions (handlers of closed ones that run on included).
   */
  admit(id: RequestId): boolean {
    if (this.closed || this.total >= MAX_MCP_REQUESTS_IN_FLIGHT) return false;
    if (this.shared && this.shared.peers.of(this.shared.peer) >= MAX_MCP_REQUESTS_IN_FLIGHT) return false;
    const entry = this.requests.get(id);
    if (entry) entry.admitted++;
    else this.requests.set(id, { admitted: 1, running: 0, cancelledRunning: 0 });
    this.count(1);
    return true;
  }

  /**
   * Admits request `id`, or returns the answer that refuses it. A request whose id is in flight already in this
   * session is refused (MCP forbids reusing an id in a session): the SDK keys handlers by id, and with two of one id
   * a cancel aborted the later one while the earlier one was answered, so the answer and the cancelled handler's
   * end both gave a slot back while a tool that ignored its abort ran on, holding none (the bound was passed by
   * one tool per such round).
   */
  take(id: RequestId): JSONRPCMessage | undefined {
    if (this.requests.has(id)) return { jsonrpc: '2.0', id, error: { code: INVALID_REQUEST, message: `request id ${JSON.stringify(id)} is in flight already in this session` } };
    return this.admit(id) ? undefined : tooManyRequests(id);
  }

  /**
   * The session closed: nothing will be answered or cancelled any more. A request whose handler runs (watched)
   * keeps its slot until that handler returns — the SDK aborted it, but a tool may ignore that; the rest are free.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const [id, entry] of this.requests) {
      const running = this.watching ? entry.running : 0;
      this.count(running - entry.admitted);
      if (running === 0) this.requests.delete(id);
      else {
        entry.admitted = running;
        entry.cancelledRunning = running;
      }
    }
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

  private count(delta: number): void {
    this.total += delta;
    if (this.shared && delta !== 0) this.shared.peers.add(this.shared.peer, delta);
  }

  private release(id: RequestId): void {
    const entry = this.requests.get(id);
    if (!entry) return;
    entry.admitted--;
    this.count(-1);
    if (entry.admitted === 0) this.requests.delete(id);
    else {
      entry.running = Math.min(entry.running, entry.admitted);
      entry.cancelledRunning = Math.min(entry.cancelledRunning, entry.running);
    }
  }
}

/** The answer to a request refused because too many are in flight. */
export function tooManyRequests(id: RequestId): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: TOO_MANY_MCP_REQUESTS, message: `more than ${MAX_MCP_REQUESTS_IN_FLIGHT} requests in flight (this session's, or the peer's in all its sessions)` } };
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
