import type { ChannelStream } from '../channel.js';
import type { AgentId } from '../identity/agent-id.js';
import type { Priority } from '../wire/messages.js';

/** What a handler knows about the call it serves. */
export interface CallContext {
  /** The caller, authenticated by its key. */
  readonly peer: AgentId;
  /** The caller's network address as this channel sees it (`ip:port`, `[v6]:port` on every channel, or a relay's description). */
  readonly remoteAddress: string;
  readonly method: string;
  /**
   * Aborts when the caller cancels, the deadline passes, or the channel drops; `reason` is an AgentError. Made
   * on first read (a getter of the context's class): read `ctx.signal` or destructure it; `{ ...ctx }` skips it.
   */
  readonly signal: AbortSignal;
  /** Epoch milliseconds by which the caller wants the answer, if it set a deadline. */
  readonly deadline: number | undefined;
  readonly priority: Priority;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Serves a unary call: returns (or resolves) the reply body; a thrown error reaches the caller as an AgentError. */
export type UnaryHandler<In = any, Out = unknown> = (body: In, context: CallContext) => Out | Promise<Out>;
/** Serves a streaming call: yields the items; the caller's slowness pauses the iteration (backpressure). */
export type StreamHandler<In = any, Out = unknown> = (body: In, context: CallContext) => AsyncIterable<Out>;
/**
 * Serves a duplex call: `incoming` yields the caller's items until its `end()` (and throws the call's abort
 * reason); each item the returned iterable yields goes back to the caller. Throwing ends the call with an error.
 */
export type DuplexHandler<In = any, Out = unknown> = (incoming: AsyncIterable<In>, context: CallContext) => AsyncIterable<Out>;

/**
 * Owns a raw byte stream once the call is accepted: returns the `response` body sent to the caller before
 * the bytes start (throw to refuse), and a function given the stream right after it. A relay pipes it on.
 */
export type TunnelHandler<In = any> = (
  body: In,
  context: CallContext,
) => Promise<TunnelAcceptance> | TunnelAcceptance;

/** What a {@link TunnelHandler} returns to accept a tunnel. */
export interface TunnelAcceptance {
  /** The body sent to the caller before the bytes start. */
  accept?: unknown;
  /** Receives the tunnel's byte stream once it is open. */
  onOpen(stream: ChannelStream): void;
}

export type HandlerEntry =
  | { kind: 'unary'; handler: UnaryHandler }
  | { kind: 'stream'; handler: StreamHandler }
  | { kind: 'tunnel'; handler: TunnelHandler }
  | { kind: 'duplex'; handler: DuplexHandler };
