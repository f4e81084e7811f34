import type { AgentId } from '../identity/agent-id.js';
import type { Priority } from '../wire/messages.js';

/** What a handler knows about the call it serves. */
export interface CallContext {
  /** The caller, authenticated by its key. */
  readonly peer: AgentId;
  readonly method: string;
  /** Aborts when the caller cancels, the deadline passes, or the channel drops; `reason` is an AgentError. */
  readonly signal: AbortSignal;
  /** Epoch milliseconds by which the caller wants the answer, if it set a deadline. */
  readonly deadline: number | undefined;
  readonly priority: Priority;
  readonly metadata: Readonly<Record<string, string>>;
}

export type UnaryHandler<In = any, Out = unknown> = (body: In, context: CallContext) => Out | Promise<Out>;
export type StreamHandler<In = any, Out = unknown> = (body: In, context: CallContext) => AsyncIterable<Out>;

export type HandlerEntry = { kind: 'unary'; handler: UnaryHandler } | { kind: 'stream'; handler: StreamHandler };
