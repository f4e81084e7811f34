import { connect, createSecureServer, type ClientHttp2Session, type SecureServerOptions } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { AgentError, abortReason, authenticatePeer, secureContextOf, type Channel, type DialContext, type ListenContext, type Listener, type Transport } from '@agentlink/core';
import { Http2Channel } from './http2-channel.js';
import { Keepalive } from './keepalive.js';

export interface Http2Options {
  /** Port to listen on (0 = any free port). Omit both port and host to only dial. */
  port?: number;
  /** Address to listen on (default 127.0.0.1 when only a port is given). */
  host?: string;
  /** Streams a peer may have open at once on one session (default 1000); more wait in the peer's queue. */
  maxConcurrentStreams?: number;
  /** Flow-control windows: per stream (default 8 MiB) and per session (default 32 MiB). */
  streamWindow?: number;
  sessionWindow?: number;
  /** Keep-alive pings on idle sessions (default every 15 s, 10 s to answer; intervalMs 0 = off). */
  keepaliveIntervalMs?: number;
  keepaliveTimeoutMs?: number;
  /** Upper bound of one TLS + HTTP/2 handshake (default 5 s). */
  connectTimeoutMs?: number;
}

/**
 * The HTTP/2 channel: h2 over TLS 1.3 (ALPN "h2") where both sides present their agent key's self-signed
 * certificate and pin the peer's key, as every agentlink channel does. Streams are HTTP/2's own.
 */
export function http2(options: Http2Options = {}): Transport {
  const listens = options.port !== undefined || options.host !== undefined;
  const streamWindow = options.streamWindow ?? 8 * 1024 * 1024;
  const sessionWindow = options.sessionWindow ?? 32 * 1024 * 1024;
  const settings = { initialWindowSize: streamWindow, maxConcurrentStreams: options.maxConcurrentStreams ?? 1000, enablePush: false };
  const keepalive = new Keepalive({ intervalMs: options.keepaliveIntervalMs ?? 15_000, timeoutMs: options.keepaliveTimeoutMs ?? 10_000 });
  // nghttp2 refuses new streams once a session holds this much: size it for the windows above.
  const maxSessionMemory = Math.ceil((sessionWindow * 2) / (1024 * 1024)) + 16;

  return {
    kind: 'http2',
    protocols: ['h2:'],

    async listen(context: ListenContext): Promise<Listener> {
      if (!listens) return { addresses: [], close: async () => undefined };
      const serverOptions: SecureServerOptions = {
        key: context.tls.key,
        cert: context.tls.cert,
        minVersion: 'TLSv1.3',
        ALPNProtocols: ['h2'],
        requestCert: true,
        rejectUnauthorized: false, // no CA: the client is trusted for the key it proves (below)
        allowHTTP1: false,
        settings,
        maxSessionMemory,
        // Garbage that parses as the start of a TLS record would otherwise hold its socket for node's 120 s.
        handshakeTimeout: 5000,
      };
      const server = createSecureServer(serverOptions);
      const sessions = new Set<import('node:http2').ServerHttp2Session>();
      server.on('session', (session) => {
        sessions.add(session);
        session.once('close', () => sessions.delete(session));
        const socket = session.socket as TLSSocket;
        let peer;
        try {
          peer = authenticatePeer(socket);
        } catch {
          session.destroy(undefined, 0xa6_0000 + 8); // UNAUTHENTICATED in agentlink's private code range
          return;
        }
        session.setLocalWindowSize(sessionWindow);
        context.onChannel(new Http2Channel(session, peer, `${socket.remoteAddress}:${socket.remotePort}`, 'remote', context.onStream));
      });
      // Garbage on the port, or a client that is not h2 over TLS 1.3, costs only its own socket.
      server.on('tlsClientError', (_error, socket) => socket.destroy());
      server.on('sessionError', () => undefined);
      server.on('unknownProtocol', (socket) => socket.destroy());
      const host = options.host ?? '127.0.0.1';
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(options.port ?? 0, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const { port } = server.address() as AddressInfo;
      const shownHost = host.includes(':') ? `[${host}]` : host;
      return {
        addresses: [`h2://${shownHost}:${port}`],
        close: () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            // server.close waits for every session: end the ones a peer still holds open.
            for (const session of sessions) session.destroy();
          }),
      };
    },

    dial(address: URL, context: DialContext): Promise<Channel> {
      return new Promise<Channel>((resolve, reject) => {
        const authority = `https://${address.host}`;
        const session: ClientHttp2Session = connect(authority, {
          secureContext: secureContextOf(context.tls), // TLS 1.3 only, our key and certificate
          ALPNProtocols: ['h2'],
          rejectUnauthorized: false, // no CA: the server is trusted for the key it proves (below)
          settings,
          maxSessionMemory,
        });
        let settled = false;
        const fail = (error: AgentError): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          context.signal.removeEventListener('abort', onAbort);
          session.destroy();
          reject(error);
        };
        const timeoutMs = options.connectTimeoutMs ?? 5000;
        const timer = setTimeout(() => fail(new AgentError('UNAVAILABLE', `no HTTP/2 session with ${address.host} within ${timeoutMs} ms`)), timeoutMs);
        const onAbort = (): void => fail(abortReason(context.signal));
        if (context.signal.aborted) return onAbort();
        context.signal.addEventListener('abort', onAbort, { once: true });
        session.once('error', (error) => fail(new AgentError('UNAVAILABLE', `cannot reach ${address.host}: ${error.message}`, { cause: error })));
        session.once('close', () => fail(new AgentError('UNAVAILABLE', `${address.host} closed the session during the handshake`)));
        // Ready once TLS proved the peer's key and its SETTINGS arrived (its stream limit is then known).
        let connected = false;
        let settingsArrived = false;
        const ready = (): void => {
          if (!connected || !settingsArrived || settled) return;
          settled = true;
          clearTimeout(timer);
          context.signal.removeEventListener('abort', onAbort);
          session.setLocalWindowSize(sessionWindow);
          keepalive.watch(session, address.host);
          const socket = session.socket as TLSSocket;
          resolve(new Http2Channel(session, context.expectedPeer, `${socket.remoteAddress}:${socket.remotePort}`, 'local', context.onStream));
        };
        session.once('remoteSettings', () => {
          settingsArrived = true;
          ready();
        });
        session.once('connect', () => {
          try {
            authenticatePeer(session.socket as TLSSocket, context.expectedPeer);
          } catch (error) {
            return fail(error as AgentError);
          }
          connected = true;
          ready();
        });
      });
    },
  };
}
