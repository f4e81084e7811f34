import type { Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import { AgentError } from '../errors.js';
import type { AgentId } from '../identity/agent-id.js';
import { agentIdOfCertificate } from '../identity/certificate.js';
import type { Channel, ChannelKind } from '../channel.js';
import type { ConnectionActivity } from './connection-groups.js';
import { ConnectionAdmission, type AdmissionTicket, type ListenerLimits } from './listener-limits.js';
import type { Refusal } from './refusal.js';

/** Options of {@link TlsListenerGuard}: the limits, the listener's kind and where refusals go. */
export interface TlsListenerGuardOptions {
  kind: ChannelKind;
  limits?: ListenerLimits;
  /** Receives each refusal. */
  onRefused?(refusal: Refusal): void;
  /** An extra check of each new TCP connection (after the limits), e.g. the rendezvous's own per-IP rate. */
  admitConnection?(ip: string): boolean;
}

/** A channel that reports its activity (its first stream opened, its last one ended) to whoever set `activity`. */
export interface ActivityReporting {
  activity: ConnectionActivity | undefined;
}

/** Why an evicted connection was closed: the peer's pool redials when it next needs the peer. */
export function evictionReason(): AgentError {
  return new AgentError('RESOURCE_EXHAUSTED', 'listener full: this idle connection was closed to admit a peer with fewer connections');
}

/**
 * What every node:tls listener (WebSocket, HTTP/2) does about strangers before and right after the TLS handshake:
 * listener limits on the raw TCP connection (before any TLS work), the handshake's timeout and failures, and
 * the client certificate's check. Each refusal is reported through `onRefused`.
 */
export class TlsListenerGuard {
  private readonly admission: ConnectionAdmission;
  /** Raw sockets refused before TLS: their TLS socket then fails its handshake, which is not a second refusal. */
  private readonly refusedSockets = new WeakSet<Socket>();
  /** Each admitted raw socket's place in the limits, until its channel is adopted. */
  private readonly tickets = new WeakMap<Socket, AdmissionTicket>();

  constructor(private readonly options: TlsListenerGuardOptions) {
    this.admission = new ConnectionAdmission(options.limits);
  }

  /** The `handshakeTimeout` to create the server with. */
  get handshakeTimeoutMs(): number {
    return this.admission.handshakeTimeoutMs;
  }

  /** Connections the listener holds now (in handshake or open). */
  get connections(): number {
    return this.admission.connections;
  }

  /** Hooks the raw 'connection' and the TLS handshake's failures of `server` (create it with `handshakeTimeoutMs`). */
  attach(server: TlsServer): void {
    // 'connection' is the raw TCP socket, before any TLS work is spent on it.
    server.on('connection', (socket: Socket) => {
      const ip = socket.remoteAddress ?? '';
      const admitted = this.admission.admit(ip);
      if (typeof admitted === 'string') return this.refuseConnection(socket, admitted);
      socket.once('close', () => admitted.release());
      if (this.options.admitConnection && !this.options.admitConnection(ip)) return this.refuseConnection(socket, 'admit-connection');
      this.tickets.set(socket, admitted);
      // In its handshake a connection has no streams: it is idle, and evicted by closing its socket.
      admitted.onEvict(() => {
        this.report({ stage: 'connection', reason: 'evicted', remoteAddress: addressOf(socket), code: 'RESOURCE_EXHAUSTED' });
        this.refusedSockets.add(socket); // its TLS socket's failed handshake is not a second refusal
        socket.destroy();
      });
    });
    // Garbage on the port, a handshake that does not finish in time, or a client that is not TLS 1.3: only
    // that socket pays.
    server.on('tlsClientError', (error: Error & { code?: string }, socket: TLSSocket) => {
      // node's server-side TLSSocket keeps the raw socket it wraps as `_parent`.
      const raw = (socket as TLSSocket & { _parent?: Socket })._parent;
      if (raw && this.refusedSockets.has(raw)) return socket.destroy();
      const timeout = error.code === 'ERR_TLS_HANDSHAKE_TIMEOUT';
      this.report({ stage: 'handshake', reason: timeout ? 'handshake-timeout' : 'handshake-failed', remoteAddress: addressOf(socket), detail: error.message });
      socket.destroy();
    });
  }

  /**
   * The peer's AgentId from the certificate it presented, or the UNAUTHENTICATED error after reporting the refusal
   * (reason `no-certificate` or `wrong-key-type`); the caller then closes the socket the way its protocol says.
   */
  authenticate(socket: TLSSocket): AgentId | AgentError {
    const certificate = socket.getPeerX509Certificate();
    try {
      return agentIdOfCertificate(certificate);
    } catch (error) {
      const refusal = error instanceof AgentError ? error : new AgentError('UNAUTHENTICATED', String(error));
      this.report({
        stage: 'handshake',
        reason: certificate ? 'wrong-key-type' : 'no-certificate',
        remoteAddress: addressOf(socket),
        code: 'UNAUTHENTICATED',
        detail: refusal.message,
      });
      return refusal;
    }
  }

  /**
   * Hands the connection under `socket` (the server's TLS socket) to its channel: the channel reports its activity
   * to the connection's place in the limits, and an eviction closes the channel with RESOURCE_EXHAUSTED (a GOAWAY
   * saying why; only an idle connection is ever evicted, so no call is cut).
   */
  adopt(socket: TLSSocket, channel: Channel & ActivityReporting): void {
    const raw = (socket as TLSSocket & { _parent?: Socket })._parent;
    const ticket = raw && this.tickets.get(raw);
    if (!ticket) return;
    this.tickets.delete(raw);
    channel.activity = ticket;
    if (channel.activeStreams > 0) ticket.busy();
    ticket.onEvict(() => {
      this.report({ stage: 'connection', reason: 'evicted', remoteAddress: channel.remoteAddress, peer: channel.peer, code: 'RESOURCE_EXHAUSTED' });
      void channel.close(evictionReason());
    });
  }

  /** Connections evicted to make room for newcomers so far. */
  get evictions(): number {
    return this.admission.evictions;
  }

  /** Reports a refusal of this listener's kind. */
  report(refusal: Omit<Refusal, 'kind'>): void {
    this.options.onRefused?.({ kind: this.options.kind, ...refusal });
  }

  private refuseConnection(socket: Socket, reason: string): void {
    const remoteAddress = addressOf(socket);
    this.refusedSockets.add(socket);
    socket.destroy();
    this.report({ stage: 'connection', reason, remoteAddress });
  }
}

/** `ip:port` or `[v6]:port` of a socket's peer. */
export function addressOf(socket: { remoteAddress?: string; remotePort?: number }): string {
  const ip = socket.remoteAddress ?? 'unknown';
  return `${ip.includes(':') ? `[${ip}]` : ip}:${socket.remotePort ?? 0}`;
}
