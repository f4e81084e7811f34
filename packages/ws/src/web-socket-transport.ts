import { constants as cryptoConstants } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { ConnectionOptions, TLSSocket } from 'node:tls';
import { AgentError, type AgentId, type ListenerLimits, type Transport } from '@agentlink/core';
import {
  TlsListenerGuard,
  abortReason,
  addressOf,
  authenticatePeer,
  secureContextOf,
  type Channel,
  type DialContext,
  type ListenContext,
  type Listener,
  positiveInteger,
  resolveMuxOptions,
  type MuxOptions,
  MAX_MUX_BODY,
  MUX_HEADER_BYTES,
} from '@agentlink/core/transport';
import { WebSocket, WebSocketServer, type ClientOptions } from 'ws';
import { channelOverWebSocket } from './web-socket-pipe.js';

export interface WebSocketOptions {
  /** Port to listen on (0 = any free port). Omit both port and host to only dial. */
  port?: number;
  /** Address to listen on (default 127.0.0.1 when only a port is given). */
  host?: string;
  /** URL path of the endpoint (default /agentlink). */
  path?: string;
  /**
   * Largest WebSocket message accepted (default: the largest mux frame, 5 + 64 KiB, or 5 + `mux.maxChunk` if that
   * is larger; see `LARGEST_AGENTLINK_MESSAGE`). The mux tells the peer, so a peer with a larger `maxChunk` sends
   * pieces this large here and no larger; below 5 + 64 KiB, a peer's full-size frame closes the connection with
   * 1009. ws holds an unfinished message below the mux, outside core's inbound budgets, so this is what every
   * connection may make the listener hold that way (docs/security.md).
   */
  maxPayload?: number;
  /** Per-stream flow control of the multiplexer. */
  mux?: MuxOptions;
  /** Local address outgoing connections bind to (the interface to dial from). */
  localAddress?: string;
  /**
   * Asked for every incoming TCP connection before TLS, with the client's IP: false closes it at once (e.g. a
   * per-IP connection rate, as the rendezvous uses). Costs a refused client nothing but its SYN. Runs after
   * `limits`.
   */
  admitConnection?(ip: string): boolean;
  /** What the listener lets strangers hold before they proved a key (core's ListenerLimits, see docs/security.md). */
  limits?: ListenerLimits;
}

const DEFAULT_PATH = '/agentlink';
/**
 * The largest WebSocket message an agentlink peer sends: each message is one mux frame, sent unfragmented (the
 * turn batch corks the socket, it never joins frames into one message), and the largest frame is a DATA or OPEN
 * frame of `maxChunk` bytes (GOAWAY's text is cut at 512 characters; other frames are 9 bytes at most). Every byte
 * of an unfinished message is held by ws below the mux, where core's inbound budgets do not see it: with ws's
 * maxPayload at 1 MiB (until 2026-11-24) a stranger held ~1 MiB per connection, 4 GiB over a listener's 4,096;
 * at this size 64 KiB, 256 MiB.
 */
export const LARGEST_AGENTLINK_MESSAGE = MUX_HEADER_BYTES + MAX_MUX_BODY;
/**
 * Pongs owed to a peer that pings without reading, waiting past the socket's buffers; one more terminates the
 * connection (docs/security.md). ws answers every ping by itself; before ws 8.23 nothing bounded those answers,
 * so a peer flooding 125-byte pings and never reading grew our write queue without limit.
 */
const MAX_PENDING_PONGS = 60;
/**
 * Fragments one WebSocket message may arrive in; one more closes the connection (1008). agentlink sends each mux
 * frame as one unfragmented message, and other libraries cut a 1 MiB message into at most a few hundred. ws keeps
 * every fragment of an unfinished message (~200 B of heap each, beside its bytes) below the mux, where core's
 * inbound budgets do not see it: its default of 16,384 let one connection hold ~3 MB that way, 4,096 connections
 * 13 GB.
 */
export const MAX_FRAGMENTS = 1024;
/**
 * Reads one WebSocket frame may arrive in while ws holds them (at least; see `maxBufferedReads`); one more closes the
 * connection (1008). ws keeps each read of an unfinished frame as a Buffer of its own (~190 B of heap beside its
 * bytes): a peer sending a 64 KiB frame in one-byte TLS records made ws hold 65,541 of them, 12.3 MB of heap per
 * connection (2026-11-24), where `maxPayload` promised 64 KiB. A frame written at once arrives in 16 KiB records (a
 * few hundred 1.4 KB ones first from TLS stacks that size records dynamically, as Go's does); 1,024 reads is 64 bytes
 * a record for the largest default frame. ws's default is 262,144.
 */
export const MAX_BUFFERED_READS = 1024;

/** The bound on reads held for a side taking frames of `maxPayload` bytes: 1 KiB a read on average, 1,024 reads at least. */
export function maxBufferedReads(maxPayload: number): number {
  return Math.max(MAX_BUFFERED_READS, Math.ceil(maxPayload / 1024));
}
/** A refused client gets this long to read its 401 before its socket is destroyed. */
const REFUSAL_LINGER_MS = 1000;
function ignore(): void {}
/**
 * ws's options for MAX_PENDING_PONGS, the reads held (`maxBufferedChunks`, both from ws 8.23) and MAX_FRAGMENTS (from
 * 8.22); @types/ws 8.18 lists none.
 */
function frameBounds(maxPayload: number): object {
  return { maxPendingAutoPongs: MAX_PENDING_PONGS, maxFragments: MAX_FRAGMENTS, maxBufferedChunks: maxBufferedReads(maxPayload) };
}
/**
 * ws emits 'message', 'ping' and 'pong' as it reads them (ws's default since 8.17, set here because the channel
 * relies on it): the frame reader in front of ws (frame-reader.ts) takes the frames after them in the same read,
 * which a deferred event would then follow instead of precede.
 */
const SYNCHRONOUS_EVENTS = true;

/**
 * The WebSocket channel: `wss://` over TLS 1.3 where both sides present a self-signed certificate of their
 * agent key and pin the peer's key (the identity model of every agentlink channel). Streams are core's mux.
 */
export function webSocket(options: WebSocketOptions = {}): Transport {
  const path = options.path ?? DEFAULT_PATH;
  // Checked here, so a mistake fails `webSocket({ mux })` itself rather than every connection later.
  const mux = resolveMuxOptions(options.mux);
  // ws reads maxPayload 0 as "no limit": refused here, so no setting lifts the bound on an unfinished message.
  const maxPayload = positiveInteger('ws option maxPayload', options.maxPayload, MUX_HEADER_BYTES + Math.max(MAX_MUX_BODY, mux.maxChunk));
  const listens = options.port !== undefined || options.host !== undefined;

  return {
    kind: 'ws',
    protocols: ['wss:'],

    async listen(context: ListenContext): Promise<Listener> {
      if (!listens) return { addresses: [], close: async () => undefined };
      const guard = new TlsListenerGuard({ kind: 'ws', limits: options.limits, onRefused: context.onRefused, admitConnection: options.admitConnection });
      const server = createServer({
        key: context.tls.key,
        cert: context.tls.cert,
        minVersion: 'TLSv1.3',
        requestCert: true,
        // There is no CA: the peer is trusted for the key it proves, checked below, not for a chain.
        rejectUnauthorized: false,
        // No stateless TLS session tickets (with TLS 1.3 OpenSSL then issues stateful ones, which only a server-side
        // session cache could resume): no agentlink client resumes a session, and a server held ~13 KiB more per
        // idle connection that was sent stateless ones (docs/performance-log.md, "Server memory per idle peer", tls-floor).
        secureOptions: cryptoConstants.SSL_OP_NO_TICKET,
        // Garbage that parses as the start of a TLS record would otherwise hold its socket for node's 120 s.
        handshakeTimeout: guard.handshakeTimeoutMs,
      });
      const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, allowSynchronousEvents: SYNCHRONOUS_EVENTS, ...frameBounds(maxPayload) });
      guard.attach(server);
      // The key each client proved, read once at its handshake's end and taken by its upgrade.
      const provenPeers = new WeakMap<TLSSocket, AgentId>();
      // Right when the handshake ends: a client without an agent certificate gets its 401 now, not after sending
      // a request (or holding the socket until node's header timeout).
      server.on('secureConnection', (socket: TLSSocket) => {
        const peer = guard.authenticate(socket);
        if (peer instanceof AgentError) refuse(socket, 401, 'Unauthorized');
        else provenPeers.set(socket, peer);
      });
      server.on('upgrade', (request, socket, head) => {
        // node's HTTP server let go of the socket: without this, a peer's reset would crash the process.
        socket.on('error', ignore);
        if (socket.writableEnded) return; // refused at the handshake already
        const tlsSocket = socket as TLSSocket;
        if (new URL(request.url ?? '/', 'https://x').pathname !== path) return refuse(socket, 404, 'Not Found');
        const peer = provenPeers.get(tlsSocket);
        if (peer === undefined) return refuse(socket, 401, 'Unauthorized'); // no agent key proved at the handshake
        wss.handleUpgrade(request, socket, head, (ws) => {
          const channel = channelOverWebSocket(ws, tlsSocket, {
            peer,
            remoteAddress: addressOf(tlsSocket),
            role: 'listener',
            onStream: context.onStream,
            onRefused: context.onRefused,
            mux,
            maxPayload,
          });
          guard.adopt(tlsSocket, channel);
          context.onChannel(channel);
        });
      });
      server.on('request', (request, response) => {
        if (request.socket.writableEnded) return; // refused at the handshake already
        response.writeHead(426, { 'content-type': 'text/plain' }).end('agentlink: WebSocket upgrade required\n');
      });
      // A malformed request costs that one socket, nothing else.
      server.on('clientError', (_error, socket) => socket.destroy());
      const host = options.host ?? '127.0.0.1';
      await listen(server, options.port ?? 0, host);
      const { port } = server.address() as AddressInfo;
      return {
        addresses: [`wss://${formatHost(host)}:${port}${path}`],
        close: () => closeServer(server, wss),
      };
    },

    dial(address: URL, context: DialContext): Promise<Channel> {
      return new Promise<Channel>((resolve, reject) => {
        if (context.signal.aborted) return reject(abortReason(context.signal));
        // ws hands its options to tls.connect, which takes a shared context (a field @types/ws does not list).
        const clientOptions: ClientOptions & Pick<ConnectionOptions, 'secureContext'> = {
          secureContext: secureContextOf(context.tls), // TLS 1.3 only, our key and certificate
          rejectUnauthorized: false,
          maxPayload,
          perMessageDeflate: false,
          allowSynchronousEvents: SYNCHRONOUS_EVENTS,
          ...frameBounds(maxPayload),
          localAddress: options.localAddress,
          generateMask: zeroMask,
        };
        const ws = new WebSocket(address, clientOptions);
        let settled = false;
        const fail = (error: AgentError): void => {
          if (settled) return;
          settled = true;
          context.signal.removeEventListener('abort', onAbort);
          ws.terminate();
          reject(error);
        };
        const onAbort = (): void => fail(abortReason(context.signal));
        context.signal.addEventListener('abort', onAbort, { once: true });
        let remoteAddress = address.host;
        let raw: TLSSocket | undefined;
        ws.on('upgrade', (response) => {
          const socket = response.socket as TLSSocket;
          raw = socket;
          remoteAddress = addressOf(socket);
          try {
            authenticatePeer(socket, context.expectedPeer);
          } catch (error) {
            fail(error as AgentError);
          }
        });
        ws.on('unexpected-response', (_request, response) => {
          fail(new AgentError(response.statusCode === 401 ? 'UNAUTHENTICATED' : 'UNAVAILABLE', `${address.href} answered HTTP ${response.statusCode}`));
        });
        ws.on('error', (error) => fail(new AgentError('UNAVAILABLE', `cannot reach ${address.href}: ${error.message}`, { cause: error })));
        ws.on('open', () => {
          if (settled) return;
          settled = true;
          context.signal.removeEventListener('abort', onAbort);
          resolve(
            channelOverWebSocket(ws, raw!, {
              peer: context.expectedPeer,
              remoteAddress,
              role: 'dialer',
              onStream: context.onStream,
              onRefused: context.onRefused,
              mux,
              maxPayload,
            }),
          );
        });
      });
    },
  };
}


/** Answers with an HTTP status and ends the socket; one that does not close its side is destroyed soon after. */
function refuse(socket: import('node:stream').Duplex, status: number, message: string): void {
  socket.on('error', ignore);
  socket.end(`HTTP/1.1 ${status} ${message.replace(/[\r\n]/g, ' ')}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function closeServer(server: Server, wss: WebSocketServer): Promise<void> {
  for (const client of wss.clients) client.terminate();
  wss.close();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * The masking key of every frame this client sends: zero, so neither side XORs each payload byte (ws does it byte
 * by byte in JavaScript without the optional native addon: ~4 µs per 1 KB message here, and as much again to unmask
 * at the server). The frames stay RFC 6455 frames (MASK bit set, a key; a zero key is a key), so any server reads
 * them. Masking protects proxies that read cleartext from frames crafted by untrusted script in a browser; an
 * agentlink client runs no such script and its frames travel inside TLS, where no intermediary reads them
 * (docs/security.md, "WebSocket frames").
 */
function zeroMask(mask: Buffer): void {
  // Four stores, not fill(): fill crosses into C++ for every frame the client sends.
  mask[0] = 0;
  mask[1] = 0;
  mask[2] = 0;
  mask[3] = 0;
}
