/**
 * The bounds the hostile-peer suite holds every channel to, in one place (docs/security.md, "Hostile-peer suite",
 * gives them with their reasons). Memory bounds are RSS growth of the attacked process over its baseline, so
 * allocator slack and the Node runtime's own noise count against them: they are generous on purpose, and still
 * an order of magnitude below what each attack achieved before the limits existed (0.8–2.4 GB).
 */
const MiB = 1024 * 1024;

export const HOSTILE_BOUNDS = {
  /**
   * Server RSS growth while one hostile connection attacks: what it may make the server hold by design — the
   * per-channel budget of unfinished inbound frames (maxInboundBytesPerChannel, 32 MiB) plus the largest
   * connection-level transport window (QUIC's 64 MiB) — plus 64 MiB for what the runtime frees late (Buffers are
   * released when V8 collects their objects, which it does after external memory grew by about that much).
   */
  serverGrowthDuringBytes: 160 * MiB,
  /**
   * Server RSS growth once the hostile peer left and garbage was collected: RSS does not shrink to the live set
   * (the allocator keeps freed pages), so this bounds leaks, not the allocator's retention.
   */
  serverGrowthAfterBytes: 80 * MiB,
  /**
   * RSS growth of a caller reading 16 streams of 1 MiB items slowly: per stream its transport window (up to
   * 2 MiB on QUIC) plus a read-ahead bounded in bytes (one item here), not eight items — and the same 64 MiB of
   * late-freed Buffers.
   */
  callerGrowthBytes: 128 * MiB,
  /** The server's requestTimeoutMs in the suite, so never-finished requests are reset quickly. */
  requestTimeoutMs: 500,
  /** Upper bound for any expected reaction (a reset, a close, streams drained): generous, the machine is noisy. */
  reactionMs: 10_000,
} as const;

/** The size of each attack: the suite's (small, fast) and the measurement script's (the original measurements). */
export interface AttackScale {
  /** Attack 1: streams, each declaring one frame of `declaredBytes` and sending `sentBytes` of it. */
  hugeFrames: { streams: number; declaredBytes: number; sentBytes: number };
  /** Attack 2: stream calls of large items nobody reads. */
  unreadStreams: { streams: number; itemBytes: number };
  /** Attack 3: streams whose request never completes. */
  unfinishedRequests: { streams: number };
  /** Attack 4: streams (or OPEN frames) past the per-channel limit from a peer that does not read. */
  openFlood: { streams: number };
  /** Attack 5: depth of nested msgpack arrays. */
  deepNesting: { depth: number; streams: number };
  /** Attack 7: streams opened and abandoned. */
  abandoned: { streams: number; concurrency: number };
  /** Attack 8: streams of large items a caller consumes slowly. */
  slowReaders: { streams: number; itemBytes: number };
}

export const SUITE_SCALE: AttackScale = {
  hugeFrames: { streams: 48, declaredBytes: 16 * MiB, sentBytes: 2 * MiB },
  unreadStreams: { streams: 200, itemBytes: 64 * 1024 },
  unfinishedRequests: { streams: 200 },
  openFlood: { streams: 20_000 },
  deepNesting: { depth: 100_000, streams: 8 },
  abandoned: { streams: 10_000, concurrency: 250 },
  slowReaders: { streams: 16, itemBytes: 1 * MiB },
};

/** The sizes the attacks were first measured with (issue #14), for the report. */
export const REPORT_SCALE: AttackScale = {
  ...SUITE_SCALE,
  hugeFrames: { streams: 48, declaredBytes: 16 * MiB, sentBytes: 15 * MiB },
  unreadStreams: { streams: 900, itemBytes: 256 * 1024 },
  openFlood: { streams: 200_000 },
};
