import { AgentError, type ErrorCode } from '../errors.js';
import type { CallControl, CallHandler, CallInfo, Dispatch, Interceptor } from '../agent/interceptor.js';
import { nonNegativeNumber, positiveInteger } from '../util/options.js';

/** Options of {@link retry}: attempts, backoff, and which errors are retried. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 4). */
  maxAttempts?: number;
  /** Delay before the first retry (default 50 ms); doubled each time, up to `maxDelayMs` (default 2 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Codes worth another attempt (default UNAVAILABLE, RESOURCE_EXHAUSTED, CLOSED, DEADLINE_EXCEEDED of an attempt). */
  retryOn?: readonly ErrorCode[];
  /** Called before each retry, e.g. to log it. */
  onRetry?(call: CallInfo, error: AgentError, attempt: number, delayMs: number): void;
}

const DEFAULT_CODES: readonly ErrorCode[] = ['UNAVAILABLE', 'RESOURCE_EXHAUSTED', 'CLOSED', 'DEADLINE_EXCEEDED'];

/**
 * Retries calls marked `idempotent` after a retryable failure, with exponential backoff and full jitter, within
 * the call's deadline. Never retries once the caller has seen a result or an item (that would repeat them),
 * nor a call the caller aborted. Calls not marked idempotent pass straight through.
 */
export function retry(options: RetryOptions = {}): Interceptor {
  const settings = {
    maxAttempts: positiveInteger('retry maxAttempts', options.maxAttempts, 4),
    baseDelayMs: nonNegativeNumber('retry baseDelayMs', options.baseDelayMs, 50),
    maxDelayMs: nonNegativeNumber('retry maxDelayMs', options.maxDelayMs, 2000),
    retryOn: new Set(options.retryOn ?? DEFAULT_CODES),
    onRetry: options.onRetry,
  };
  return (dispatch) => (call, handler) => {
    if (!call.idempotent) return dispatch(call, handler);
    new RetryingCall(dispatch, call, handler, settings).attempt();
  };
}

type Settings = Required<Omit<RetryOptions, 'retryOn' | 'onRetry'>> & Pick<RetryOptions, 'onRetry'> & { retryOn: Set<ErrorCode> };

class RetryingCall implements CallHandler, CallControl {
  private attempts = 0;
  private delivered = false;
  private started = false;
  private current: CallControl | undefined;
  private stoppedWith: AgentError | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dispatch: Dispatch,
    private readonly call: CallInfo,
    private readonly handler: CallHandler,
    private readonly settings: Settings,
  ) {}

  attempt(): void {
    this.attempts++;
    this.dispatch(this.call, this);
  }

  /** The caller's control: cancels the attempt in flight or the wait before the next one, and stops retrying. */
  abort(reason: AgentError): void {
    if (this.stoppedWith) return;
    this.stoppedWith = reason;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.handler.onError(reason);
    } else this.current?.abort(reason);
  }

  onStart(control: CallControl): void {
    this.current = control;
    if (this.started) return;
    this.started = true;
    this.handler.onStart?.(this);
  }

  onResponse(body: unknown): void {
    this.delivered = true;
    this.handler.onResponse?.(body);
  }

  onItem(item: unknown, size?: number): void | Promise<void> {
    this.delivered = true;
    return this.handler.onItem?.(item, size);
  }

  onEnd(): void {
    this.handler.onEnd();
  }

  onError(error: AgentError): void {
    const delay = this.retryDelay(error);
    if (delay === undefined) return this.handler.onError(error);
    this.settings.onRetry?.(this.call, error, this.attempts, delay);
    const signal = this.call.signal;
    const onAbort = (): void => this.abort(this.call.abortReason!);
    signal.addEventListener('abort', onAbort, { once: true });
    this.timer = setTimeout(() => {
      this.timer = undefined;
      signal.removeEventListener('abort', onAbort);
      if (this.stoppedWith) return;
      this.attempt();
    }, delay);
  }

  /** Milliseconds to wait before the next attempt, or undefined when this failure is final. */
  private retryDelay(error: AgentError): number | undefined {
    if (this.delivered || this.stoppedWith || this.call.abortReason) return undefined;
    if (this.attempts >= this.settings.maxAttempts || !this.settings.retryOn.has(error.code)) return undefined;
    const cap = Math.min(this.settings.maxDelayMs, this.settings.baseDelayMs * 2 ** (this.attempts - 1));
    const delay = Math.random() * cap; // full jitter: spreads retries of many callers apart
    const remaining = this.call.remainingMs();
    if (remaining !== null && delay >= remaining) return undefined;
    return delay;
  }
}
