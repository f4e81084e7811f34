import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { chooseEngine, engineSources, ENGINE_OVERRIDE_VARIABLE, missingEngineMessage } from './engine-loader.js';
import { detectLibc, targetName, type ReportHeader } from './engine-target.js';

/** The addon's surface (packages/quic/native/src): what this package calls, nothing more. */
export interface NativeStream {
  tryWrite(data: Buffer): number;
  /**
   * `tryWrite`, then `tryFinish` when all of `data` was taken, in one call; returns the bytes taken. Up to 16 KiB
   * are taken whole and written and finished by an engine task, which may wait for the peer's credit: taken counts
   * as written (as a kernel's taking does for ws); the connection counts it meanwhile (`heldWrites`).
   */
  tryWriteFinish(data: Buffer): number;
  write(data: Buffer): Promise<void>;
  /** Bytes ready now; an empty buffer once the peer's end was reached; null when nothing is ready. */
  tryRead(max: number): Buffer | null;
  read(max: number): Promise<Buffer | null>;
  /** Asks for the next bytes through the connection's push reads (`startReads`); false when they are not running. */
  armRead(token: number, max: number): boolean;
  /**
   * `tryRead`, and `armRead` when nothing is ready, in one crossing: the bytes (empty at the peer's end), true
   * once armed, false when push reads are not running (then `read`).
   */
  readOrArm(token: number, max: number): Buffer | boolean;
  tryFinish(): boolean;
  finish(): Promise<void>;
  reset(code: number): void;
  /** Finishes our side after what was written and stops theirs with `code`; false when a write holds our side. */
  cancel(code: number): boolean;
  setPriority(priority: number): void;
  /**
   * Resolves with the code once the peer stopped our sending side (STOP_SENDING); null once our side is done
   * otherwise (delivered, released, reset locally); fails as a read does when the connection is lost. Holds no
   * write back.
   */
  stopped(): Promise<number | null>;
  /** Stops the peer's sending side only (STOP_SENDING), ours stays open; false when a read holds that half. */
  stop(code: number): boolean;
  release(): void;
}

/** A finished push read: bytes (absent when only the end came), the peer's end, or a failure (`CODE|detail`). */
export interface NativeReadEvent {
  token: number;
  data?: Buffer | null;
  fin: boolean;
  error?: string | null;
  /** With push accepts: a stream the peer opened (token 0), in the order they were opened. */
  stream?: NativeStream | null;
}

export interface NativeConnection {
  readonly peerKey: Buffer;
  readonly remoteAddress: string;
  readonly stableId: number;
  /** The protocol the handshake chose ('agentlink/2', 'agentlink/1'); null while a dialler's 0-RTT handshake runs. */
  readonly protocol: string | null;
  /** 'none' (handed over after a full handshake), 'pending' (during it: 0-RTT / 0.5-RTT), 'accepted', 'rejected'. */
  readonly earlyData: 'none' | 'pending' | 'accepted' | 'rejected';
  /** Resolves once the handshake ended: false when the peer rejected our 0-RTT data (or the connection failed). */
  handshakeDone(): Promise<boolean>;
  tryOpenStream(): NativeStream | null;
  openStream(): Promise<NativeStream>;
  acceptStream(): Promise<NativeStream | null>;
  /** Waits for a stream the peer opened and takes every other one already opened with it; empty once closed. */
  acceptStreams(): Promise<NativeStream[]>;
  /**
   * Starts push reads: `onReady` is called once per batch of finished reads, which `takeReads` then returns. With
   * `accept`, streams the peer opens come in the same batches (then never call `acceptStreams`).
   */
  startReads(onReady: () => void, accept?: boolean): boolean;
  takeReads(): NativeReadEvent[];
  close(code: number, reason: string): void;
  closed(): Promise<string>;
  release(): void;
  stats(): {
    rttMs: number;
    sentBytes: number;
    receivedBytes: number;
    lostPackets: number;
    congestionWindow: number;
    /** Last writes the engine holds now (`tryWriteFinish`'s, waiting to be written and finished). */
    heldWrites: number;
    /** Held last writes that did not go (the peer stopped the stream, the connection was lost). */
    heldWriteFailures: number;
    /** Probes sent to a silent peer while a read waited on it (native/src/quiet.rs). */
    quietProbes: number;
  };
  /** Last writes the engine holds now on this connection's streams, released ones included (a plain call). */
  heldWrites(): number;
}

/** A peer the engine turned away before it became a connection (see native/src/listener.rs). */
export interface NativeRefusal {
  stage: 'connection' | 'handshake';
  /** max-connections, max-connections-per-ip, ip-rate, evicted; handshake-timeout, no-certificate, wrong-key, wrong-key-type, tls-alert, handshake-failed. */
  reason: string;
  remoteAddress: string;
  /** Empty for limit refusals. */
  detail: string;
  /** The agent key of the peer it concerns, where known: an evicted connection that had proved its key. */
  peerKey?: Buffer | null;
}

/** A dial in progress; `cancel` abandons its handshake (the engine closes it). */
export interface NativeDial {
  connection(): Promise<NativeConnection>;
  cancel(): void;
}

export interface NativeEndpoint {
  readonly localPort: number;
  /** `host` is an IP literal (IPv6 with or without brackets) or a name, looked up without blocking. */
  /** `earlyData`: with a ticket from this peer, hand the connection over before its handshake ends (0-RTT). */
  dial(host: string, port: number, expectedKey: Buffer, timeoutMs: number, earlyData?: boolean): NativeDial;
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
  /** IPv6 peers are counted per network of this many leading bits (1–128). */
  ipv6PrefixLength?: number;
  /** Offer and accept only agentlink/1, as an engine from before agentlink/2 does (interop tests). */
  legacyProtocol?: boolean;
}

export interface NativeBinding {
  engineVersion(): string;
  /** Engine connections and streams not yet released by JavaScript (leak tests). */
  liveObjects(): { connections: number; streams: number };
  /** Times a writer gave up its core after a stream's first bytes (`tryWrite`), since the engine loaded (tests). */
  firstWriteYields(): number;
  /** The scheduling slice (ns) the engine's threads asked for and the kernel accepted; 0 where none (tests). */
  engineThreadSliceNs(): number;
  bindEndpoint(options: EndpointOptions): Promise<NativeEndpoint>;
}

export type NativeLoad = { ok: true; binding: NativeBinding; from: string } | { ok: false; reason: string };

/** This process's napi-rs target: linux-x64-gnu, linux-arm64-musl, darwin-arm64, win32-x64-msvc, … */
export function platformTarget(): string {
  const libc =
    process.platform === 'linux'
      ? detectLibc((process.report?.getReport() as { header?: ReportHeader } | undefined)?.header, () =>
          existsSync(`/lib/ld-musl-${process.arch === 'x64' ? 'x86_64' : process.arch === 'arm64' ? 'aarch64' : process.arch}.so.1`),
        )
      : undefined;
  return targetName({ platform: process.platform, arch: process.arch, libc });
}

let cached: NativeLoad | undefined;

/**
 * Finds the engine (see engine-loader.ts for the order: $AGENTLINK_QUIC_NATIVE alone if set, else the local build,
 * else the platform package `@agentlink/quic-<target>`). Never throws: a failure is a reason, naming the platform,
 * the supported targets and the override variable.
 */
export function loadNative(): NativeLoad {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const target = platformTarget();
  // src/ and dist/ both sit one level below the package root, where a local build leaves its file.
  const packageRoot = fileURLToPath(new URL('..', import.meta.url));
  const choice = chooseEngine<NativeBinding>(engineSources(target, process.env[ENGINE_OVERRIDE_VARIABLE], packageRoot), {
    exists: existsSync,
    load: (specifier) => require(specifier) as NativeBinding,
    resolve: (specifier) => require.resolve(specifier),
  });
  cached = choice.ok ? choice : { ok: false, reason: missingEngineMessage(target, choice.failures) };
  return cached;
}
