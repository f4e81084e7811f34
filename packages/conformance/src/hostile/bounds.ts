/**
 * The bounds the hostile-peer suite holds every channel to, in one place (docs/security.md, "Hostile-peer suite",
 * gives them with their reasons). Memory bounds are RSS growth of the attacked process over its baseline, so
 * allocator slack and the Node runtime's own noise count against them: they are generous on purpose, and still
 * an order of magnitude below what each attack achieved before the limits existed (0.8–2.4 GB).
 */
const MiB = 1024 * 1024;

/** The per-channel budget of unfinished inbound frames (docs/security.md: maxInboundBytesPerChannel). */
export const CHANNEL_BUDGET_BYTES = 32 * MiB;

export const HOSTILE_BOUNDS = {
  /**
   * Server RSS growth while one hostile connection attacks: what the server may hold by design — the per-channel
   * budget of unfinished inbound frames (maxInboundBytesPerChannel, 32 MiB) and a connection-level window of at
   * most 32 MiB (HTTP/2's session window; QUIC accepts 16 MiB) — plus 96 MiB the runtime frees late (Buffers are
   * released only when V8 collects their objects; the allocator keeps freed pages, Rust's included).
   */
  serverGrowthDuringBytes: 160 * MiB,
  /**
   * RSS growth once the hostile peer left and garbage was collected: the design bound (64 MiB) plus 64 MiB of
   * allocator retention. RSS does not shrink to the live set (QUIC's engine heap kept ~40 MiB more than the others,
   * and repeating the attack four times in one process plateaued instead of growing: retention, not a leak), so
   * this catches memory kept beyond the design bound (before the limits, 0.8 GB stayed), not the allocator's habits.
   */
  serverGrowthAfterBytes: 128 * MiB,
  /**
   * RSS growth of a caller reading 16 streams of 1 MiB items slowly: per stream its transport window (up to
   * 4 MiB on QUIC, the 16 streams within its 64 MiB connection window) plus a read-ahead bounded in bytes (one
   * item here), not eight items — 64 + 16 MiB by design — and the same 64 MiB of late-freed Buffers. (128 MiB
   * while QUIC's stream window was 2 MiB: 48 MiB by design; with 4 MiB CI measured 140 MiB on QUIC.)
   */
  callerGrowthBytes: 160 * MiB,
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
  abandoned: { streams: 10_000, concurrency: 100 },
  slowReaders: { streams: 16, itemBytes: 1 * MiB },
};

/** The sizes the attacks were first measured with (issue #14), for the report. */
export const REPORT_SCALE: AttackScale = {
  ...SUITE_SCALE,
  hugeFrames: { streams: 48, declaredBytes: 16 * MiB, sentBytes: 15 * MiB },
  unreadStreams: { streams: 900, itemBytes: 256 * 1024 },
  openFlood: { streams: 200_000 },
};
