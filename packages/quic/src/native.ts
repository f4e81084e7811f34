import { createRequire } from 'node:module';

/** The addon's surface (packages/quic/native/src): what this package calls, nothing more. */
export interface NativeStream {
  tryWrite(data: Buffer): number;
  write(data: Buffer): Promise<void>;
  /** Bytes ready now; an empty buffer once the peer's end was reached; null when nothing is ready. */
  tryRead(max: number): Buffer | null;
  read(max: number): Promise<Buffer | null>;
  tryFinish(): boolean;
  finish(): Promise<void>;
  reset(code: number): void;
  /** Finishes our side after what was written and stops theirs with `code`; false when a write holds our side. */
  cancel(code: number): boolean;
  setPriority(priority: number): void;
  release(): void;
}

export interface NativeConnection {
  readonly peerKey: Buffer;
  readonly remoteAddress: string;
  readonly stableId: number;
  tryOpenStream(): NativeStream | null;
  openStream(): Promise<NativeStream>;
  acceptStream(): Promise<NativeStream | null>;
  close(code: number, reason: string): void;
  closed(): Promise<string>;
  release(): void;
  stats(): { rttMs: number; sentBytes: number; receivedBytes: number; lostPackets: number; congestionWindow: number };
}

/** A peer the engine turned away before it became a connection (see native/src/listener.rs). */
export interface NativeRefusal {
  stage: 'connection' | 'handshake';
  /** max-connections, max-connections-per-ip, ip-rate; handshake-timeout, no-certificate, wrong-key, wrong-key-type, tls-alert, handshake-failed. */
  reason: string;
  remoteAddress: string;
  /** Empty for limit refusals. */
  detail: string;
}

/** A dial in progress; `cancel` abandons its handshake (the engine closes it). */
export interface NativeDial {
  connection(): Promise<NativeConnection>;
  cancel(): void;
}

export interface NativeEndpoint {
  readonly localPort: number;
  /** `host` is an IP literal (IPv6 with or without brackets) or a name, looked up without blocking. */
  dial(host: string, port: number, expectedKey: Buffer, timeoutMs: number): NativeDial;
  /** Resolves once every connection of the endpoint is closed and drained. */
  idle(): Promise<void>;
  accept(): Promise<NativeConnection | null>;
  /** The next refusal, or null once the endpoint is closed. */
  nextRefusal(): Promise<NativeRefusal | null>;
  recvRaw(): Promise<{ host: string; port: number; data: Buffer } | null>;
  sendRaw(host: string, port: number, data: Buffer): Promise<void>;
  close(code: number, reason: string): void;
}

export interface EndpointOptions {
  host: string;
  port: number;
  cert: Buffer;
  key: Buffer;
  accept: boolean;
  idleTimeoutMs?: number;
  streamWindow?: number;
  connectionWindow?: number;
  maxStreams?: number;
  congestion?: string;
  maxConnections?: number;
  maxConnectionsPerIp?: number;
  newConnectionsPerIpPerSecond?: number;
  handshakeTimeoutMs?: number;
}

export interface NativeBinding {
  engineVersion(): string;
  /** Engine connections and streams not yet released by JavaScript (leak tests). */
  liveObjects(): { connections: number; streams: number };
  bindEndpoint(options: EndpointOptions): Promise<NativeEndpoint>;
}

export type NativeLoad = { ok: true; binding: NativeBinding; from: string } | { ok: false; reason: string };

/** napi-rs platform triple: linux-x64-gnu, darwin-arm64, win32-x64-msvc, … */
export function platformTarget(): string {
  if (process.platform === 'linux') {
    const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
    return `linux-${process.arch}-${report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`;
  }
  if (process.platform === 'win32') return `win32-${process.arch}-msvc`;
  return `${process.platform}-${process.arch}`;
}

let cached: NativeLoad | undefined;

/**
 * Finds the engine: the file named by $AGENTLINK_QUIC_NATIVE if set, else the prebuilt platform package `@agentlink/quic-<target>`
 * (an optionalDependency, so npm installs only the one for this machine). Never throws: a failure is a reason.
 */
export function loadNative(): NativeLoad {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const target = platformTarget();
  // An explicit path is authoritative (a wrong one turns QUIC off rather than silently loading another build).
  const override = process.env.AGENTLINK_QUIC_NATIVE;
  const candidates = override ? [override] : [`@agentlink/quic-${target}`];
  const failures: string[] = [];
  for (const candidate of candidates) {
    try {
      const binding = require(candidate) as NativeBinding;
      cached = { ok: true, binding, from: require.resolve(candidate) };
      return cached;
    } catch (error) {
      failures.push(`${candidate}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  cached = {
    ok: false,
    reason: `no QUIC engine for ${target} (${failures.join('; ')}). Install @agentlink/quic-${target}, or build it: pnpm --filter @agentlink/quic build:native (needs cargo)`,
  };
  return cached;
}
