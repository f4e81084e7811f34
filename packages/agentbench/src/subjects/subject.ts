/** Something agentbench measures: an agentlink channel, or a raw transport as the baseline beside it. */
export interface Subject {
  /** Shown in the table, e.g. "agentlink quic" or "raw http2 (TLS)". */
  readonly name: string;
  /** Name of the raw subject this one is compared with (ratios), if it is an agentlink channel. */
  readonly baseline?: string;
  /**
   * A fresh connection: raw subjects complete the handshake here; agentlink dials on the session's first call,
   * as an application's first `send` does. Connect time = this plus a first request/response either way.
   */
  connect(): Promise<Session>;
  /** Releases what `connect` reuses between connections (an agent, a QUIC endpoint); run outside any timing. A later `connect` starts afresh. */
  dispose?(): Promise<void>;
}

export interface Session {
  /** One request/response with `payload`; resolves when the full echo arrived. */
  echo(payload: Buffer): Promise<void>;
  /**
   * Receives `totalBytes` from the server on one stream, written in chunks of `chunkBytes` (every `delayMs` when
   * paced, like a model emitting tokens); `onData` sees each arrival. Returns the bytes received.
   */
  download(totalBytes: number, chunkBytes: number, pacing?: Pacing): Promise<number>;
  close(): Promise<void>;
}

export interface Pacing {
  delayMs?: number;
  onData?(bytes: number): void;
}

/** Addresses the server process prints, one per subject kind. */
export interface ServerAddresses {
  agentlinkQuic?: string;
  agentlinkWs: string;
  agentlinkHttp2: string;
  rawWss: string;
  rawHttp2: string;
  rawQuic?: { host: string; port: number; key: string };
  /** JSON-RPC over ws with mutual TLS: its URL and the server's key (pinned). */
  jsonRpcWs?: { url: string; key: string };
  /** The least RPC over ws (an id and a method name before each body), same mutual TLS: its URL and the server's key. */
  binaryRpcWs?: { url: string; key: string };
}
