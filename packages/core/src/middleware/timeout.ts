import { AgentError } from '../errors.js';
import type { CallControl, Interceptor } from '../agent/interceptor.js';
import { tapHandler } from '../agent/interceptor.js';
import { positiveNumber } from '../util/options.js';

/** Options of {@link timeout}: the deadline applied to calls that set none. */
export interface TimeoutOptions {
  /** Longest one attempt may take, in milliseconds. */
  ms: number;
  /** Per-method overrides, e.g. `{ summarize: 60_000 }`. */
  methods?: Readonly<Record<string, number>>;
}

/**
 * Ends each attempt that takes longer than `ms` with DEADLINE_EXCEEDED (gRPC's per-try timeout). The call's
 * own deadline still bounds the whole call; placed inside `retry()`, a slow attempt is retried.
 */
export function timeout(options: TimeoutOptions): Interceptor {
  positiveNumber('timeout ms', options.ms, 0);
  for (const [method, ms] of Object.entries(options.methods ?? {})) positiveNumber(`timeout methods.${method}`, ms, 0);
  return (dispatch) => (call, handler) => {
    const ms = options.methods?.[call.method] ?? options.ms;
    let control: CallControl | undefined;
    const timer = setTimeout(() => control?.abort(new AgentError('DEADLINE_EXCEEDED', `${call.method}: attempt took longer than ${ms} ms`)), ms);
    const stop = (): void => clearTimeout(timer);
    dispatch(call, tapHandler(handler, { onStart: (c) => (control = c), onEnd: stop, onError: stop }));
  };
}
