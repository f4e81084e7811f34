import { setMaxListeners } from 'node:events';
import { AgentError } from '../errors.js';
import type { AgentId } from '../identity/agent-id.js';
import { abortReason } from '../util/abort.js';
import { LazyAbort } from '../util/lazy-abort.js';
import { signalDeadline } from '../util/signal-deadline.js';
import { deadlineTimer } from '../util/timer.js';
import type { CallMode, Priority } from '../wire/messages.js';
import type { CallControl, CallHandler, CallInfo } from './interceptor.js';

/** Options of one call ({@link Agent.send}, {@link Agent.stream}): deadline, cancellation, priority. */
export interface CallOptions {
  /**
   * Aborting it cancels the call on both sides (the remote handler's `ctx.signal` aborts too). A handler's own
   * `ctx.signal` also brings that call's deadline: the call ends by it at the latest, and the next agent sees it.
   */
  signal?: AbortSignal;
  /**
   * Deadline relative to now, in milliseconds; it travels to the handler. Infinity = none. With a handler's
   * `ctx.signal` as `signal`, the earlier of this and that handler's deadline.
   */
  timeoutMs?: number;
  /** Order among calls waiting for a channel, and on a shared pipe (default `normal`). */
  priority?: Priority;
  metadata?: Record<string, string>;
  /** Safe to run more than once: the retry interceptor may resend it after a retryable failure. */
  idempotent?: boolean;
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
 * The caller's call, across all its attempts: its deadline and its cancellation. Whatever ends the call early
 * (abort, deadline, a consumer that stops reading) cancels the attempt in flight, which resets its stream and
 * so cancels the remote handler within one round trip.
 */
export class OutboundCall implements CallInfo {
  readonly direction = 'outbound';
  readonly deadline: number | undefined;
  readonly priority: Priority;
  metadata: Readonly<Record<string, string>>;
  readonly idempotent: boolean;
  /**
   * The control the outermost handler received (undici's controller model): aborting the whole call goes through
   * it, so interceptors that wrap the control (retry) see the abort and stop.
   */
  private control: CallControl | undefined;
  /**
   * The agent's own handler of the call (its lifecycle), told of an abort that comes before any attempt started:
   * an interceptor still holding the call (awaiting a token fetch, a bug) must not keep it past its deadline.
   */
  private outermost: CallHandler | undefined;
  private readonly aborted = new LazyAbort();
  private readonly timer: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    readonly peer: AgentId,
    readonly method: string,
    readonly body: unknown,
    readonly mode: CallMode,
    private readonly options: CallOptions,
    defaultTimeoutMs: number | undefined,
  ) {
    this.priority = options.priority ?? 'normal';
    this.metadata = options.metadata ?? EMPTY;
    this.idempotent = options.idempotent ?? false;
    const timeoutMs = withinInheritedDeadline(options.timeoutMs ?? defaultTimeoutMs, options.signal);
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

  get abortReason(): AgentError | undefined {
    return this.aborted.reason;
  }

  setMetadata(key: string, value: string): void {
    this.metadata = { ...this.metadata, [key]: value };
  }

  get signal(): AbortSignal {
    return this.aborted.signal;
  }

  get completed(): boolean {
    return this.finished;
  }

  remainingMs(): number | null {
    return this.deadline === undefined ? null : Math.max(0, this.deadline - Date.now());
  }

  abort(reason: AgentError): void {
    if (this.finished || !this.aborted.abort(reason)) return;
    // Interceptors that wait before calling next (rate limit) hear the abort on `signal` and report it themselves;
    // for any other, the call ends here, and an attempt it starts later is cancelled at once (`started`).
    if (this.control) this.control.abort(reason);
    else this.outermost?.onError(reason);
  }

  /** The agent's handler of this call, given before the interceptors run (see `outermost`). */
  handledBy(handler: CallHandler): void {
    this.outermost = handler;
  }

  /**
   * The agent's dispatch of the call returned. An abort that came before the agent's handler existed (a signal
   * aborted already, seen by the constructor) reached no one: if no attempt took it, the call ends here, as a later
   * abort does (an interceptor that holds the call must not keep it pending whatever the caller's signal said).
   */
  dispatched(): void {
    const reason = this.aborted.reason;
    if (reason && !this.control && !this.finished) this.outermost?.onError(reason);
  }

  /** The outermost handler's `onStart`: from now on an abort of the call is passed to `control`. */
  started(control: CallControl): void {
    this.control = control;
    if (this.aborted.reason) control.abort(this.aborted.reason);
  }

  /** The call reached its end (either way): stop the deadline timer and forget the caller's signal. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    this.options.signal?.removeEventListener('abort', this.onUserAbort);
  }

  private readonly onUserAbort = (): void => {
    if (this.options.signal) this.abort(abortReason(this.options.signal));
  };
}

/**
 * A call made with a handler's `ctx.signal` ends by that handler's deadline at the latest (a chain of agents: the
 * user's deadline reaches the model through the orchestrator, as its `ctx.deadline`). An invalid `timeoutMs` is
 * left as given, for the constructor's check.
 */
function withinInheritedDeadline(timeoutMs: number | undefined, signal: AbortSignal | undefined): number | undefined {
  const inherited = signal === undefined ? undefined : signalDeadline(signal);
  if (inherited === undefined) return timeoutMs;
  const remaining = Math.max(0, inherited - Date.now());
  if (timeoutMs === undefined || timeoutMs === Number.POSITIVE_INFINITY) return remaining;
  return Number.isFinite(timeoutMs) && timeoutMs >= 0 ? Math.min(timeoutMs, remaining) : timeoutMs;
}

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});
