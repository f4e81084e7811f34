import { AgentError } from '../errors.js';
import { INITIAL_WINDOW, MAX_ANNOUNCED_MUX_BODY, MAX_MUX_BODY } from './mux-frame.js';
import { integerInRange, nonNegativeInteger, positiveInteger } from '../util/options.js';

/** Flow-control and limit options of the mux. */
export interface MuxOptions {
  /** Per-stream receive window in bytes (default and minimum 256 KiB); a larger one is announced to the peer. */
  window?: number;
  /**
   * Auto-tuning: a stream's receive window doubles while its reader consumes half of it in under two round trips,
   * up to `maxWindow` bytes (default 16 MiB; equal to `window` = off), so one stream fills a long fat path
   * (100 Mbit/s at 80 ms RTT needs ~1 MiB). All streams of a channel together grow by at most
   * `maxChannelWindowGrowth` bytes (default 32 MiB): the bound on what auto-tuning lets one peer make us hold.
   */
  maxWindow?: number;
  maxChannelWindowGrowth?: number;
  /**
   * Largest DATA frame body this side sends: 1 byte to 16 MiB (default 64 KiB, the largest every peer takes).
   * Above 64 KiB it is sent only to a peer that announced it takes that much (a WebSocket side whose `maxPayload`
   * allows it: by default 5 + its own `maxChunk`); to others, 64 KiB. Larger pieces cost less CPU per byte in
   * bulk; smaller ones let other streams' frames in sooner.
   */
  maxChunk?: number;
  /** Streams the peer may have open at once (default 1024); more are refused with RESOURCE_EXHAUSTED. */
  maxInboundStreams?: number;
  /** Writers wait while the pipe holds more than this many unsent bytes (default 1 MiB). */
  highWaterMark?: number;
  /**
   * Unsent bytes past which the peer counts as not reading (default 4 × highWaterMark): control frames (window
   * updates, resets, refusals) do not wait for room, so a peer that stops reading and keeps sending could
   * otherwise make them pile up. Past it the channel is closed with RESOURCE_EXHAUSTED.
   */
  maxUnsentBytes?: number;
}

/** Every mux option with its default filled in. */
export type ResolvedMuxOptions = Required<MuxOptions>;

const MAX_U32 = 0xffff_ffff;

/**
 * Checks each mux option and fills in its default; an invalid one throws INVALID_ARGUMENT naming it. Run when a
 * transport is created (so a mistake shows at `webSocket({ mux })`, not at each connection) and by every mux.
 * Unchecked before 2026-11-24, `maxChunk: 0` made a write loop forever without yielding (no byte per piece).
 */
export function resolveMuxOptions(options: MuxOptions = {}): ResolvedMuxOptions {
  const window = options.window ?? INITIAL_WINDOW;
  if (!Number.isSafeInteger(window) || window < INITIAL_WINDOW || window > MAX_U32) {
    throw new AgentError('INVALID_ARGUMENT', `mux.window must be an integer from ${INITIAL_WINDOW} to ${MAX_U32}, got ${String(options.window)}`);
  }
  const maxWindow = options.maxWindow ?? Math.max(window, 16 * 1024 * 1024);
  if (!Number.isSafeInteger(maxWindow) || maxWindow < window || maxWindow > MAX_U32) {
    throw new AgentError('INVALID_ARGUMENT', `mux.maxWindow must be an integer from mux.window (${window}) to ${MAX_U32}, got ${String(options.maxWindow)}`);
  }
  const maxChannelWindowGrowth = options.maxChannelWindowGrowth ?? 32 * 1024 * 1024;
  if (!Number.isSafeInteger(maxChannelWindowGrowth) || maxChannelWindowGrowth < 0) {
    throw new AgentError('INVALID_ARGUMENT', `mux.maxChannelWindowGrowth must be a non-negative integer, got ${String(options.maxChannelWindowGrowth)}`);
  }
  // Up to what a peer can announce it takes (a larger piece would never be sent).
  const maxChunk = integerInRange('mux.maxChunk', options.maxChunk, MAX_MUX_BODY, 1, MAX_ANNOUNCED_MUX_BODY);
  const maxInboundStreams = nonNegativeInteger('mux.maxInboundStreams', options.maxInboundStreams, 1024);
  const highWaterMark = positiveInteger('mux.highWaterMark', options.highWaterMark, 1024 * 1024);
  const maxUnsentBytes = positiveInteger('mux.maxUnsentBytes', options.maxUnsentBytes, 4 * highWaterMark);
  return { window, maxWindow, maxChannelWindowGrowth, maxChunk, maxInboundStreams, highWaterMark, maxUnsentBytes };
}

