import {
  AgentError,
  agentIdFromPublicKey,
  publicKeyFromAgentId,
  type ListenerLimits,
  type Transport,
} from '@agentlink/core';
import {
  abortReason,
  errorCodeToNumber,
  integerInRange,
  MAX_TIMER_MS,
  resolveListenerLimits,
  type Channel,
  type DialContext,
  type ListenContext,
  type Listener,
  type TransportContext,
} from '@agentlink/core/transport';
import { fromNative } from './native-errors.js';
import { loadNative, type NativeConnection, type NativeEndpoint } from './native.js';
import { QuicChannel } from './quic-channel.js';
import { reportRefusals } from './quic-refusals.js';

export interface QuicOptions {
  /** UDP port to listen on (0 = any free port). Omit both port and host to only dial. */
  port?: number;
  /** Address to bind (default 127.0.0.1 when only a port is given). */
  host?: string;
  /** A peer silent this long is gone; keep-alives go out every third of it (default 10 s). */
  idleTimeoutMs?: number;
  /** Upper bound of one QUIC handshake we dial (default 5 s); a listener's is `limits.handshakeTimeoutMs`. */
  connectTimeoutMs?: number;
  /**
   * Receive windows in bytes: per stream (default 4 MiB: one stream fills 100 Mbit/s at 80 ms RTT with 1% loss)
   * and per connection (default 64 MiB on connections this agent dials — room for 16 calls whose consumers stall
   * before the connection's other calls wait for credit — and 16 MiB on connections peers open to it).
   */
  streamWindow?: number;
  connectionWindow?: number;
  /** Streams a peer may have open at once (default 1024). */
  maxStreams?: number;
  /**
   * Congestion controller of every connection of this endpoint (default 'delivery'). 'delivery' (the engine's own)
   * and 'bbr' (quinn's) model the path's bandwidth and RTT and do not read random loss as congestion, so a lossy
   * path (Wi-Fi, a long link losing 1%) keeps its throughput; 'delivery' measures the bandwidth from delivery-rate
   * samples and keeps 1.25 × bandwidth × min RTT in flight where quinn's BBR keeps 2× an inflated estimate, which
   * overflows a one-BDP queue (docs/quic.md). 'cubic' and 'newreno' halve their window at each loss, as most TCP
   * stacks do. Every controller's sends are paced over the RTT.
   */
  congestion?: QuicCongestion;
  /**
   * What strangers may hold of the listener before proving a key, checked by the engine before any TLS work
   * (core's ListenerLimits, same defaults as every channel: 4,096 connections, 1,024 per IP, 200 new per IP
   * per second with a burst of 5 s worth, handshakes within 5 s). Refusals reach `agent.stats().refusals`.
   */
  limits?: ListenerLimits;
  /**
   * 0-RTT to known peers (default false). After one connection to a peer, the engine keeps that peer's TLS session
   * tickets (per peer key, in memory, for the life of the process: see docs/quic.md); with `zeroRtt`, a later
   * dial to it hands the channel over at once and calls marked `idempotent` send their request in the first
   * flight (one round trip to the answer instead of two). Other calls still wait for the handshake. If the peer
   * lost its tickets (it restarted), it discards the early data unread and the calls are resent once the
   * handshake ended (two round trips, as without 0-RTT). Opt-in: idempotent calls may then be replayed by an
   * attacker on the path (docs/security.md).
   */
  zeroRtt?: boolean;
  /**
   * Without an engine for this machine, QUIC is off and the agent runs on its other channels after one warning
   * (default). `required: true` makes it an error instead: `listen` (so `createAgent`) and `dial` fail with
   * `UNAVAILABLE`, naming the platform, the supported targets and the override variable.
   */
  required?: boolean;
  /**
   * Speak only the first protocol, agentlink/1, as engines before agentlink/2 do (default false): for tests of
   * mixed deployments. agentlink/2 lets a unary or streamed call's request carry the caller's end (docs/protocol.md).
   */
  legacyProtocol?: boolean;
}

export type QuicCongestion = 'delivery' | 'bbr' | 'cubic' | 'newreno';
const CONTROLLERS: readonly QuicCongestion[] = ['delivery', 'bbr', 'cubic', 'newreno'];

let warnedUnavailable = false;

const u32 = (n: number): number => Math.min(n, 0xffff_ffff);

/** A number the engine takes as a u32 (at least 1), or undefined for the engine's default. */
function engineNumber(name: keyof QuicOptions, value: number | undefined, max = 0xffff_ffff): number | undefined {
  return value === undefined ? undefined : integerInRange(`quic option ${name}`, value, 0, 1, max);
}

/**
 * The QUIC channel, on agentlink's own engine. One UDP socket per agent both listens and dials (so two agents
 * can connect to each other at once, as hole punching needs); TLS 1.3 pins agent keys both ways. Where the
 * engine cannot load, the transport says why once and refuses to dial, and the agent's other channels work.
 */
export function quic(options: QuicOptions = {}): Transport & { endpoint(): Promise<NativeEndpoint | undefined> } {
  if (options.required !== undefined && typeof options.required !== 'boolean') {
    throw new AgentError('INVALID_ARGUMENT', `quic: required must be a boolean, got ${typeof options.required}`);
  }
  if (options.zeroRtt !== undefined && typeof options.zeroRtt !== 'boolean') {
    throw new AgentError('INVALID_ARGUMENT', `quic: zeroRtt must be a boolean, got ${typeof options.zeroRtt}`);
  }
  if (options.congestion !== undefined && !CONTROLLERS.includes(options.congestion)) {
    const got = typeof options.congestion === 'string' ? JSON.stringify(options.congestion) : String(options.congestion);
    throw new AgentError('INVALID_ARGUMENT', `congestion must be one of ${CONTROLLERS.join(', ')}, got ${got}`);
  }
  // Each number checked here (undici's style): the engine takes u32s and failed only at bind, and the connect
  // timeout is a node timer (above its longest delay it fires after 1 ms). Absent ones keep the engine's defaults.
  const idleTimeoutMs = engineNumber('idleTimeoutMs', options.idleTimeoutMs, MAX_TIMER_MS);
  const streamWindow = engineNumber('streamWindow', options.streamWindow);
  const connectionWindow = engineNumber('connectionWindow', options.connectionWindow);
  const maxStreams = engineNumber('maxStreams', options.maxStreams);
  const connectTimeoutMs = integerInRange('quic option connectTimeoutMs', options.connectTimeoutMs, 5000, 1, MAX_TIMER_MS);
  const listens = options.port !== undefined || options.host !== undefined;
  const limits = resolveListenerLimits(options.limits);
  let endpoint: Promise<NativeEndpoint> | undefined;

  const bind = (context: TransportContext, accept: boolean, host: string, port: number): Promise<NativeEndpoint> => {
    const native = loadNative();
    if (!native.ok) return Promise.reject(new AgentError('UNAVAILABLE', `QUIC is off: ${native.reason}`));
    return native.binding
      .bindEndpoint({
        host,
        port,
        cert: context.tls.certDer,
        key: context.tls.keyDer,
        accept,
        idleTimeoutMs,
        streamWindow,
        connectionWindow,
        maxStreams,
        congestion: options.congestion,
        // The engine takes u32s; larger limits mean "no limit" in practice, so they are capped rather than refused.
        maxConnections: u32(limits.maxConnections),
        maxConnectionsPerIp: u32(limits.maxConnectionsPerIp),
        newConnectionsPerIpPerSecond: u32(limits.newConnectionsPerIpPerSecond),
        handshakeTimeoutMs: u32(limits.handshakeTimeoutMs),
        ipv6PrefixLength: limits.ipv6PrefixLength,
        legacyProtocol: options.legacyProtocol === true,
      })
      .catch((error: unknown) => Promise.reject(fromNative(error)));
  };

  return {
    kind: 'quic',
    protocols: ['quic:'],

    endpoint: async () => endpoint,

    async listen(context: ListenContext): Promise<Listener> {
      const native = loadNative();
      if (!native.ok && options.required) throw new AgentError('UNAVAILABLE', `QUIC is required but off: ${native.reason}`);
      if (!listens) return { addresses: [], close: async () => undefined };
      if (!native.ok) {
        if (!warnedUnavailable) {
          warnedUnavailable = true;
          process.emitWarning(`QUIC is off: ${native.reason}. Other channels still work.`, { code: 'AGENTLINK_QUIC_UNAVAILABLE' });
        }
        return { addresses: [], close: async () => undefined };
      }
      const host = options.host ?? '127.0.0.1';
      const bound = bind(context, true, host, options.port ?? 0);
      endpoint = bound;
      const listening = await bound;
      void reportRefusals(listening, context);
      void (async () => {
        for (;;) {
          const connection = await listening.accept();
          if (!connection) return;
          const peer = agentIdFromPublicKey(connection.peerKey);
          context.onChannel(new QuicChannel(connection, peer, 'remote', context.onStream));
        }
      })();
      const shownHost = host.includes(':') ? `[${host}]` : host;
      return {
        addresses: [`quic://${shownHost}:${listening.localPort}`],
        close: async () => listening.close(0, 'listener closed'),
      };
    },

    async dial(address: URL, context: DialContext): Promise<Channel> {
      // A dial-only endpoint is dual-stack, so it reaches IPv4 and IPv6 peers alike (IPv4 only where the host has no IPv6).
      endpoint ??= bind(context, false, '::', 0).catch(() => bind(context, false, '0.0.0.0', 0));
      const local = await endpoint;
      if (context.signal.aborted) throw abortReason(context.signal);
      const timeoutMs = connectTimeoutMs;
      const dial = local.dial(address.hostname, Number(address.port), Buffer.from(publicKeyFromAgentId(context.expectedPeer)), timeoutMs, options.zeroRtt === true);
      const connection = await new Promise<NativeConnection>((resolve, reject) => {
        const onAbort = (): void => {
          dial.cancel(); // the handshake is dropped: nothing is left open on either side
          reject(abortReason(context.signal));
        };
        context.signal.addEventListener('abort', onAbort, { once: true });
        dial.connection().then(
          (c) => {
            context.signal.removeEventListener('abort', onAbort);
            if (context.signal.aborted) {
              // Completed as the dial was abandoned: nobody will use it, so it is closed and freed now.
              c.close(errorCodeToNumber('CANCELLED'), 'dial aborted');
              void c.closed().then(() => c.release());
            }
            resolve(c);
          },
          (error: unknown) => {
            context.signal.removeEventListener('abort', onAbort);
            reject(context.signal.aborted ? abortReason(context.signal) : fromNative(error));
          },
        );
      });
      return new QuicChannel(connection, context.expectedPeer, 'local', context.onStream);
    },

    async close(): Promise<void> {
      const bound = endpoint;
      endpoint = undefined;
      (await bound?.catch(() => undefined))?.close(0, 'agent closed');
    },
  };
}
