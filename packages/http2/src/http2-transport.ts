import { constants as cryptoConstants } from 'node:crypto';
import { connect, createSecureServer, type ClientHttp2Session, type SecureServerOptions } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { AgentError, type ListenerLimits, type Transport } from '@agentlink/core';
import {
  TlsListenerGuard,
  abortReason,
  addressOf,
  authenticatePeer,
  integerInRange,
  MAX_TIMER_MS,
  secureContextOf,
  type Channel,
  type DialContext,
  type ListenContext,
  type Listener,
} from '@agentlink/core/transport';
import { DEFAULT_MAX_SESSION_BUFFERED, Http2Channel } from './http2-channel.js';
import { Keepalive } from './keepalive.js';
import { fromHttp2Code, toHttp2Code } from './reset-codes.js';

export interface Http2Options {
  /** Port to listen on (0 = any free port). Omit both port and host to only dial. */
  port?: number;
  /** Address to listen on (default 127.0.0.1 when only a port is given). */
  host?: string;
  /** Streams a peer may have open at once on one session (default 1000); more wait in the peer's queue. */
  maxConcurrentStreams?: number;
  /**
   * Flow-control windows: per stream (default 8 MiB) and per session (default 32 MiB). Chosen as the mux's
   * auto-tuning would end up: about 4 × the bandwidth-delay product of a 100 Mbit/s path at 160 ms RTT (2 MB),
   * so one stream fills a long fat path; node's HTTP/2 cannot grow a stream's window as it goes (nghttp2 only
   * replenishes it), so the ceiling is granted up front, within the per-session bound of docs/security.md.
   */
  streamWindow?: number;
  sessionWindow?: number;
  /** Keep-alive pings on idle sessions (default every 15 s, 10 s to answer; intervalMs 0 = off). */
  keepaliveIntervalMs?: number;
  keepaliveTimeoutMs?: number;
  /** Upper bound of one TLS + HTTP/2 handshake when dialling (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * Bytes one session's streams may hold in node's buffers unsent (default 16 MiB): writes past it wait, so a
   * peer that never credits its flow-control windows holds at most this much of our memory per session.
   */
  maxSessionBuffered?: number;
  /** What the listener lets strangers hold before they proved a key (core's ListenerLimits, see docs/security.md). */
  limits?: ListenerLimits;
  /** Local address outgoing connections bind to (the interface to dial from). */
  localAddress?: string;
}

/** The largest flow-control window HTTP/2 allows (RFC 9113, 6.9.1). */
const HTTP2_MAX_WINDOW = 2 ** 31 - 1;
/** The GOAWAY a client without an agent certificate gets. */
const UNAUTHENTICATED_GOAWAY = toHttp2Code('UNAUTHENTICATED');
function ignore(): void {}

/**
 * The HTTP/2 channel: h2 over TLS 1.3 (ALPN "h2") where both sides present their agent key's self-signed
 * certificate and pin the peer's key, as every agentlink channel does. Streams are HTTP/2's own.
 */
export function http2(options: Http2Options = {}): Transport {
  const listens = options.port !== undefined || options.host !== undefined;
  // Each option checked here (undici's style), not where node would throw at a connection or, for a timer, fire
  // after 1 ms instead: HTTP/2 windows are at most 2^31 − 1 (RFC 9113), stream counts fit 32 bits.
  const streamWindow = integerInRange('http2 option streamWindow', options.streamWindow, 8 * 1024 * 1024, 1, HTTP2_MAX_WINDOW);
  const sessionWindow = integerInRange('http2 option sessionWindow', options.sessionWindow, 32 * 1024 * 1024, 1, HTTP2_MAX_WINDOW);
  const maxConcurrentStreams = integerInRange('http2 option maxConcurrentStreams', options.maxConcurrentStreams, 1000, 1, 0xffff_ffff);
  const settings = { initialWindowSize: streamWindow, maxConcurrentStreams, enablePush: false };
  const keepalive = new Keepalive({
    intervalMs: integerInRange('http2 option keepaliveIntervalMs', options.keepaliveIntervalMs, 15_000, 0, MAX_TIMER_MS),
    timeoutMs: integerInRange('http2 option keepaliveTimeoutMs', options.keepaliveTimeoutMs, 10_000, 1, MAX_TIMER_MS),
  });
  const connectTimeoutMs = integerInRange('http2 option connectTimeoutMs', options.connectTimeoutMs, 5000, 1, MAX_TIMER_MS);
  // nghttp2 refuses new streams once a session holds this much: size it for the windows above.
  const maxSessionMemory = Math.ceil((sessionWindow * 2) / (1024 * 1024)) + 16;
  const maxSessionBuffered = options.maxSessionBuffered ?? DEFAULT_MAX_SESSION_BUFFERED;
  if (!Number.isSafeInteger(maxSessionBuffered) || maxSessionBuffered <= 0) {
    throw new AgentError('INVALID_ARGUMENT', `http2 option maxSessionBuffered must be a positive integer, got ${String(options.maxSessionBuffered)}`);
  }

  return {
    kind: 'http2',
    protocols: ['h2:'],

    async listen(context: ListenContext): Promise<Listener> {
      if (!listens) return { addresses: [], close: async () => undefined };
      const guard = new TlsListenerGuard({ kind: 'http2', limits: options.limits, onRefused: context.onRefused });
      const serverOptions: SecureServerOptions = {
        key: context.tls.key,
        cert: context.tls.cert,
        minVersion: 'TLSv1.3',
        ALPNProtocols: ['h2'],
        requestCert: true,
        rejectUnauthorized: false, // no CA: the client is trusted for the key it proves (below)
        // No stateless TLS session tickets (with TLS 1.3 OpenSSL then issues stateful ones, which only a server-side
        // session cache could resume): no agentlink client resumes a session, and a server held ~13 KiB more per
        // idle connection that was sent stateless ones (docs/performance-log.md, "Server memory per idle peer", tls-floor).
        secureOptions: cryptoConstants.SSL_OP_NO_TICKET,
        allowHTTP1: false,
        settings,
        maxSessionMemory,
        // Garbage that parses as the start of a TLS record would otherwise hold its socket for node's 120 s.
        handshakeTimeout: guard.handshakeTimeoutMs,
      };
      const server = createSecureServer(serverOptions);
      guard.attach(server);
      const sessions = new Set<import('node:http2').ServerHttp2Session>();
      server.on('session', (session) => {
        sessions.add(session);
        session.once('close', () => sessions.delete(session));
        // node creates the session right when the TLS handshake ends: the client certificate is checked now.
        session.on('error', ignore); // destroying with a code emits one; 'close' follows
        const socket = session.socket as TLSSocket;
        const peer = guard.authenticate(socket);
        if (peer instanceof AgentError) {
          // The GOAWAY carries UNAUTHENTICATED in agentlink's private code range; node ends the socket after it.
          session.destroy(peer, UNAUTHENTICATED_GOAWAY);
          return;
        }
        session.setLocalWindowSize(sessionWindow);
        const channel = new Http2Channel(session, peer, addressOf(socket), 'remote', { onStream: context.onStream, onRefused: context.onRefused, maxSessionBuffered });
        guard.adopt(socket, channel);
        context.onChannel(channel);
      });
      // Garbage on the port, or a client that is not h2 over TLS 1.3, costs only its own socket.
      server.on('sessionError', ignore);
      server.on('unknownProtocol', (socket: TLSSocket) => {
        guard.report({ stage: 'handshake', reason: 'handshake-failed', remoteAddress: addressOf(socket), detail: `ALPN ${String(socket.alpnProtocol)}, not h2` });
        socket.destroy();
      });
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
          ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
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
        const timer = setTimeout(() => fail(new AgentError('UNAVAILABLE', `no HTTP/2 session with ${address.host} within ${connectTimeoutMs} ms`)), connectTimeoutMs);
        const onAbort = (): void => fail(abortReason(context.signal));
        if (context.signal.aborted) return onAbort();
        context.signal.addEventListener('abort', onAbort, { once: true });
        // These stay on the session once the dial is settled: each checks first, so a channel's close does not build
        // an error (its stack trace) for nothing.
        session.once('error', (error) => settled || fail(new AgentError('UNAVAILABLE', `cannot reach ${address.host}: ${error.message}`, { cause: error })));
        // A listener that refuses us (e.g. UNAUTHENTICATED) says why in its GOAWAY.
        session.once('goaway', (code: number) => {
          if (code !== 0 && !settled) fail(new AgentError(fromHttp2Code(code), `${address.host} refused the session (${fromHttp2Code(code)})`, { remote: true }));
        });
        session.once('close', () => settled || fail(new AgentError('UNAVAILABLE', `${address.host} closed the session during the handshake`)));
        // Ready once TLS proved the peer's key: its SETTINGS are not waited for. The server sends them only once it
        // has our Finished, half a round trip after our handshake ended, so waiting for them put a whole round trip
        // (and a wake-up of each process) before every first call. Until they come, nghttp2 takes the peer to allow
        // 100 streams at once (RFC 9113's recommended floor), and the channel keeps its margin below that, holding
        // further streams until they arrive (test/dial-before-settings.test.ts); a peer allowing fewer refuses the
        // excess unprocessed, and those calls are resent.
        let settingsArrived = false;
        session.once('remoteSettings', () => (settingsArrived = true));
        session.once('connect', () => {
          if (settled) return;
          try {
            authenticatePeer(session.socket as TLSSocket, context.expectedPeer);
          } catch (error) {
            return fail(error as AgentError);
          }
          settled = true;
          clearTimeout(timer);
          context.signal.removeEventListener('abort', onAbort);
          session.setLocalWindowSize(sessionWindow);
          keepalive.watch(session, address.host);
          const socket = session.socket as TLSSocket;
          resolve(
            new Http2Channel(session, context.expectedPeer, addressOf(socket), 'local', {
              onStream: context.onStream,
              onRefused: context.onRefused,
              maxSessionBuffered,
              peerSettingsPending: !settingsArrived,
            }),
          );
        });
      });
    },
  };
}
