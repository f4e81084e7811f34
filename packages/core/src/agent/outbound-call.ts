import { setMaxListeners } from 'node:events';
import { AgentError, toAgentError } from '../errors.js';
import { abortReason } from '../util/abort.js';
import { deadlineTimer } from '../util/timer.js';
import type { FramedStream } from '../wire/framed-stream.js';
import type { Priority } from '../wire/messages.js';

export interface CallOptions {
  /** Aborting it cancels the call on both sides (the remote handler's `ctx.signal` aborts too). */
  signal?: AbortSignal;
  /** Deadline relative to now, in milliseconds; it travels to the handler. Infinity = none. */
  timeoutMs?: number;
  priority?: Priority;
  metadata?: Record<string, string>;
}

const signalsSeen = new WeakSet<AbortSignal>();

/**
 * One signal commonly cancels many calls at once ("stop everything"): each call listens to it, so node's
 * 10-listener leak warning would be a false alarm. Listeners are removed when each call ends.
 */
function allowManyCalls(signal: AbortSignal): void {
  if (signalsSeen.has(signal)) return;
  signalsSeen.add(signal);
  setMaxListeners(0, signal);
}

/**
 * The caller's half of one call: its deadline, its cancellation, and the stream once one is open. Whatever ends
 * the call early (abort, deadline, a consumer that stops reading) resets the stream, which cancels the remote
 * handler within one round trip.
 */
export class OutboundCall {
  readonly deadline: number | undefined;
  /** Made only when something needs a signal (a dial): AbortController is costly on the per-call hot path. */
  private controller: AbortController | undefined;
  private abortedWith: AgentError | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private framed: FramedStream | undefined;
  private finished = false;

  constructor(
    readonly method: string,
    private readonly options: CallOptions,
    defaultTimeoutMs: number | undefined,
  ) {
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    if (timeoutMs !== undefined && timeoutMs !== Number.POSITIVE_INFINITY) {
      if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
        throw new AgentError('INVALID_ARGUMENT', `timeoutMs must be a non-negative number or Infinity, got ${timeoutMs}`);
      }
      this.deadline = Date.now() + timeoutMs;
      this.timer = deadlineTimer(timeoutMs, () =>
        this.abort(new AgentError('DEADLINE_EXCEEDED', `${method}: deadline of ${timeoutMs} ms exceeded`)),
      );
    }
    const userSignal = options.signal;
    if (userSignal?.aborted) this.abort(abortReason(userSignal));
    else if (userSignal) {
      allowManyCalls(userSignal);
      userSignal.addEventListener('abort', this.onUserAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  get completed(): boolean {
    return this.finished;
  }

  get priority(): Priority {
    return this.options.priority ?? 'normal';
  }

  get metadata(): Record<string, string> {
    return this.options.metadata ?? {};
  }

  /** Milliseconds left before the deadline (never negative), or null without one. */
  remainingMs(): number | null {
    return this.deadline === undefined ? null : Math.max(0, this.deadline - Date.now());
  }

  attach(framed: FramedStream): void {
    this.framed = framed;
    if (this.abortedWith) this.resetStream(this.abortedWith);
  }

  /** The call ended as the protocol says: end our side of the stream and stop the timers. */
  complete(): void {
    if (this.finished) return;
    this.finished = true;
    this.dispose();
    this.framed?.stream.end().catch(() => undefined);
  }

  /** Ends the call early; the peer's handler is cancelled with `reason.code`. */
  abort(reason: AgentError): void {
    if (this.finished || this.abortedWith) return;
    this.abortedWith = reason;
    this.controller?.abort(reason);
    this.resetStream(reason);
  }

  /** The error the caller sees for a failure: the abort reason if the call was aborted, else the failure. */
  fail(error: unknown): AgentError {
    const failure = this.abortedWith ?? toAgentError(error, 'UNAVAILABLE');
    if (!this.finished) {
      this.finished = true;
      this.resetStream(failure);
    }
    this.dispose();
    return failure;
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.options.signal?.removeEventListener('abort', this.onUserAbort);
  }

  private readonly onUserAbort = (): void => {
    if (this.options.signal) this.abort(abortReason(this.options.signal));
  };

  private resetStream(reason: AgentError): void {
    const framed = this.framed;
    if (!framed) return;
    // The cancel frame carries the reason's text; the reset carries its code even if the frame is dropped.
    framed.send({ type: 'cancel', code: reason.code, message: reason.message }).catch(() => undefined);
    framed.stream.reset(reason);
  }
}
