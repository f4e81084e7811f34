import type { AgentError } from '../errors.js';
import type { AgentId } from '../identity/agent-id.js';
import type { CallMode, Priority } from '../wire/messages.js';

/** What interceptors know about a call. One object per call, shared by all its attempts. */
export interface CallInfo {
  /** `outbound` for calls this agent makes (`interceptors`), `inbound` for calls it serves (`inboundInterceptors`). */
  readonly direction: 'outbound' | 'inbound';
  /** The other agent: the callee of an outbound call (resolved from `<AgentId>@<url>`), the caller of an inbound one. */
  readonly peer: AgentId;
  /** Inbound calls: the caller's `ip:port` (`[v6]:port` for IPv6) as the channel sees it. */
  readonly remoteAddress?: string;
  readonly method: string;
  readonly body: unknown;
  readonly mode: CallMode;
  readonly priority: Priority;
  readonly metadata: Readonly<Record<string, string>>;
  /** The caller marked the call safe to run more than once (the retry interceptor retries only these). */
  readonly idempotent: boolean;
  /** Epoch milliseconds, or undefined without a deadline. */
  readonly deadline: number | undefined;
  /** Why the whole call was aborted (caller's signal, deadline, consumer stopped), once it was. */
  readonly abortReason: AgentError | undefined;
  /** Aborts with the reason when the whole call is aborted: for interceptors that wait (backoff, rate limits). */
  readonly signal: AbortSignal;
  /** Milliseconds left before the deadline (never negative), or null without one. */
  remainingMs(): number | null;
  /**
   * Adds or replaces one metadata entry (e.g. a trace id): outbound, it is sent with the request (the caller's
   * object is not changed); inbound, the handler sees it in `ctx.metadata`.
   */
  setMetadata(key: string, value: string): void;
  /** Ends the whole call: the current attempt is cancelled and no interceptor may start another. */
  abort(reason: AgentError): void;
}

/** Handed to `onStart` of each attempt: cancels that attempt only (a retry may follow). */
export interface CallControl {
  /** Cancels this attempt with `reason`. */
  abort(reason: AgentError): void;
}

/**
 * The lifecycle of one dispatched call, in a fixed order (the undici model): `onStart` once, then either
 * `onResponse` (unary result) or any number of `onItem` (stream items), then exactly one of `onEnd` or `onError`.
 * Returning a promise from `onItem` holds the next item until it settles: that is the backpressure.
 */
export interface CallHandler {
  /** Called once when the call starts, with the means to abort it. */
  onStart?(control: CallControl): void;
  /** The reply of a unary call. */
  onResponse?(body: unknown): void;
  /** `size`: the item's encoded bytes, when known (the caller's read-ahead is bounded by it). */
  onItem?(item: unknown, size?: number): void | Promise<void>;
  /** The call completed (after the reply or the last item). */
  onEnd(): void;
  /** The call failed; no other callback follows. */
  onError(error: AgentError): void;
}

/** Sends one call and reports its lifecycle to `handler`. */
export type Dispatch = (call: CallInfo, handler: CallHandler) => void;

/**
 * Wraps a dispatch: interceptors compose outside-in, the first in the agent's list seeing calls first. An
 * interceptor passes the same `call` on (it is one object for the whole call) and may wrap the handler.
 */
export type Interceptor = (dispatch: Dispatch) => Dispatch;

/** What an interceptor threw: the call fails with it (outbound, its attempt cancelled; inbound, as a throwing handler). */
export type FailCall = (call: CallInfo, handler: CallHandler, error: unknown) => void;

/** The call whose chain runs synchronously from `dispatchCatching` right now: its throws go up to that catch. */
let dispatching: CallInfo | undefined;

/**
 * Runs `dispatch` for a call (the agent starting an outbound call, or serving an inbound one) and turns a throw of
 * an interceptor (a bug in it) into `fail`, instead of an exception in the caller's code or a transport's reader;
 * and so a rejection of an async one (`async (call, handler) => { await check(call); next(call, handler); }`
 * type-checks as a Dispatch), which was an unhandled rejection, ending the process, with the call never settled.
 */
export function dispatchCatching(dispatch: Dispatch, call: CallInfo, handler: CallHandler, fail: FailCall): void {
  const outer = dispatching;
  dispatching = call;
  try {
    failOnRejection(dispatch(call, handler), call, handler, fail);
  } catch (error) {
    fail(call, handler, error);
  } finally {
    dispatching = outer;
  }
}

/**
 * Hands `interceptor` a `next` that turns a throw of the interceptors after it into `fail` when `next` was called
 * later (a rate limit's wait, a retry's backoff: from a timer, where the throw would escape as an uncaught
 * exception, ending the process, and the call would never settle). Called while the agent dispatches the call, the
 * throw goes on up to `dispatchCatching`, which fails the call once, at its outermost handler.
 *
 * `fail` aborts the call, and an attempt the failing interceptor had started reports that abort through the
 * handler it was given: the interceptors before it would hear the failure twice (a breaker counted two, a tap
 * logged two), from a later throw or from an async interceptor's rejection, whenever it comes. So the handler
 * passed on hears the first end only. Not on the agent's own dispatch, which is every call's path: only calls
 * that go through interceptors pay for the one object.
 */
export function failingItsCall(interceptor: Interceptor, fail: FailCall): Interceptor {
  return (next) =>
    interceptor((call, handler) => {
      const now = call === dispatching;
      const to = new EndingOnce(handler);
      try {
        failOnRejection(next(call, to), call, to, fail);
      } catch (error) {
        if (now) throw error;
        fail(call, to, error);
      }
    });
}

/** `handler`, passed the first of `onEnd` and `onError` only, and nothing after it. */
class EndingOnce implements CallHandler {
  private ended = false;

  constructor(private readonly handler: CallHandler) {}

  onStart(control: CallControl): void {
    if (!this.ended) this.handler.onStart?.(control);
  }

  onResponse(body: unknown): void {
    if (!this.ended) this.handler.onResponse?.(body);
  }

  onItem(item: unknown, size?: number): void | Promise<void> {
    return this.ended ? undefined : this.handler.onItem?.(item, size);
  }

  onEnd(): void {
    if (this.ended) return;
    this.ended = true;
    this.handler.onEnd();
  }

  onError(error: AgentError): void {
    if (this.ended) return;
    this.ended = true;
    this.handler.onError(error);
  }
}

/** What an interceptor returned: a promise (an async interceptor, which `Dispatch` allows) fails the call if it rejects. */
function failOnRejection(returned: unknown, call: CallInfo, handler: CallHandler, fail: FailCall): void {
  if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function') {
    (returned as PromiseLike<unknown>).then(undefined, (error: unknown) => fail(call, handler, error));
  }
}

/** Builds the dispatch chain: `interceptors[0]` outermost, `terminal` (the network) innermost. */
export function composeInterceptors(interceptors: readonly Interceptor[], terminal: Dispatch): Dispatch {
  return interceptors.reduceRight<Dispatch>((next, interceptor) => interceptor(next), terminal);
}

/** Callbacks {@link tapHandler} calls before passing each event on. */
export type HandlerTaps = Partial<Pick<CallHandler, 'onStart' | 'onResponse' | 'onEnd' | 'onError'>> & {
  /** Each stream item, with its encoded size when known. */
  onItem?(item: unknown, size?: number): void;
};

/**
 * A handler that runs `taps` before passing each event on to `handler` unchanged: the shape of most
 * observing interceptors (metrics, logging, breakers). Taps must not throw.
 */
export function tapHandler(handler: CallHandler, taps: HandlerTaps): CallHandler {
  return {
    onStart(control) {
      taps.onStart?.(control);
      handler.onStart?.(control);
    },
    onResponse(body) {
      taps.onResponse?.(body);
      handler.onResponse?.(body);
    },
    onItem(item, size) {
      taps.onItem?.(item, size);
      return handler.onItem?.(item, size);
    },
    onEnd() {
      taps.onEnd?.();
      handler.onEnd();
    },
    onError(error) {
      taps.onError?.(error);
      handler.onError(error);
    },
  };
}
