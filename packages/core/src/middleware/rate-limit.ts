import { AgentError } from '../errors.js';
import type { AgentId } from '../identity/agent-id.js';
import type { Interceptor } from '../agent/interceptor.js';
import { TokenBucket } from './token-bucket.js';
import { nonNegativeNumber, positiveNumber } from '../util/options.js';

/** A token bucket: `ratePerSecond` tokens refill up to `burst`. */
export interface BucketOptions {
  /** Calls per second, sustained. */
  ratePerSecond: number;
  /** Calls allowed at once after a quiet spell (default: one second's worth). */
  burst?: number;
}

/** Options of {@link rateLimit}: one bucket per peer and/or per method, and how long a call may wait for a token. */
export interface RateLimitOptions {
  /** One bucket for all calls of the agent. */
  global?: BucketOptions;
  /** One bucket per peer. */
  perPeer?: BucketOptions;
  /**
   * Longest a call may wait for its turn (default 1 s, never beyond its deadline); a call that would wait
   * longer fails at once with RESOURCE_EXHAUSTED. 0 = never wait.
   */
  maxWaitMs?: number;
}

/** Peers' buckets kept at most; the least recently created are dropped first (a full bucket again). */
const MAX_PEER_BUCKETS = 10_000;

/**
 * Token-bucket rate limiting of outgoing calls, per peer and/or for the whole agent. A call over the rate waits
 * its turn (callers are served in order) if that is within `maxWaitMs` and its deadline, else fails with
 * RESOURCE_EXHAUSTED before anything is sent.
 */
export function rateLimit(options: RateLimitOptions): Interceptor {
  for (const [scope, bucket] of [['global', options.global], ['perPeer', options.perPeer]] as const) {
    if (!bucket) continue;
    positiveNumber(`rateLimit ${scope}.ratePerSecond`, bucket.ratePerSecond, 0);
    positiveNumber(`rateLimit ${scope}.burst`, bucket.burst, 1);
  }
  const makeBucket = (b: BucketOptions) => new TokenBucket(b.ratePerSecond, b.burst ?? Math.max(1, b.ratePerSecond));
  const global = options.global ? makeBucket(options.global) : undefined;
  const peers = new Map<AgentId, TokenBucket>();
  const maxWaitMs = nonNegativeNumber('rateLimit maxWaitMs', options.maxWaitMs, 1000);

  const peerBucket = (peer: AgentId): TokenBucket | undefined => {
    if (!options.perPeer) return undefined;
    let bucket = peers.get(peer);
    if (!bucket) {
      if (peers.size >= MAX_PEER_BUCKETS) peers.delete(peers.keys().next().value!);
      peers.set(peer, (bucket = makeBucket(options.perPeer)));
    }
    return bucket;
  };

  return (dispatch) => (call, handler) => {
    const buckets = [global, peerBucket(call.peer)].filter((b): b is TokenBucket => b !== undefined);
    const delay = Math.max(0, ...buckets.map((b) => b.delayIfTaken()));
    const remaining = call.remainingMs();
    if (delay > maxWaitMs || (remaining !== null && delay >= remaining)) {
      handler.onStart?.({ abort: () => undefined });
      return handler.onError(new AgentError('RESOURCE_EXHAUSTED', `rate limit: ${call.method} would wait ${Math.ceil(delay)} ms for its turn`));
    }
    for (const bucket of buckets) bucket.take();
    if (delay === 0) return dispatch(call, handler);
    const signal = call.signal;
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      dispatch(call, handler);
    }, delay);
    const onAbort = (): void => {
      clearTimeout(timer);
      for (const bucket of buckets) bucket.giveBack();
      handler.onStart?.({ abort: () => undefined });
      handler.onError(call.abortReason!);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  };
}
