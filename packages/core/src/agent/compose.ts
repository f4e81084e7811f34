import { AgentError, toAgentError } from '../errors.js';
import type { Agent } from './agent.js';
import type { CallOptions } from './outbound-call.js';

/**
 * Composition over `send`: fan out, fall back, race. Each is a thin layer: the calls are ordinary calls (their
 * interceptors, deadlines and metrics apply), and a call whose answer is no longer needed is cancelled, so the
 * losing handlers see CANCELLED within one round trip.
 */

export interface ParallelOptions extends CallOptions {
  /** `all` (default): every answer, failing on the first failure; `first`: the first success; `quorum`: the first `quorum` successes. */
  mode?: 'all' | 'first' | 'quorum';
  /** How many successes `quorum` waits for (default: a majority of the peers). */
  quorum?: number;
}

/** One signal per composed call: the caller's, and ours to cancel the losers. */
function linkedController(signal: AbortSignal | undefined): { controller: AbortController; unlink(): void } {
  const controller = new AbortController();
  if (!signal) return { controller, unlink: () => undefined };
  const onAbort = (): void => controller.abort(signal.reason);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return { controller, unlink: () => signal.removeEventListener('abort', onAbort) };
}

function needPeers(peers: readonly string[], what: string): void {
  if (peers.length === 0) throw new AgentError('INVALID_ARGUMENT', `${what} needs at least one peer`);
}

/**
 * Calls `method` on every peer at once. `all` resolves with the answers in the peers' order (the first failure
 * cancels the rest and rejects); `first` with the first success; `quorum` with the first `quorum` successes,
 * in arrival order, failing once that many can no longer succeed. Calls still running when the result is
 * known are cancelled.
 */
export async function parallel<Out = unknown>(agent: Agent, peers: readonly string[], method: string, body?: unknown, options: ParallelOptions = {}): Promise<Out[]> {
  needPeers(peers, 'parallel');
  const { mode = 'all', quorum: quorumOption, ...callOptions } = options;
  const needed = mode === 'all' ? peers.length : mode === 'first' ? 1 : (quorumOption ?? Math.floor(peers.length / 2) + 1);
  if (!Number.isInteger(needed) || needed < 1 || needed > peers.length) {
    throw new AgentError('INVALID_ARGUMENT', `quorum must be an integer from 1 to ${peers.length}, got ${quorumOption}`);
  }
  const { controller, unlink } = linkedController(callOptions.signal);
  const signal = controller.signal;
  let running = peers.length;
  try {
    return await new Promise<Out[]>((resolve, reject) => {
      const answers: Out[] = mode === 'all' ? new Array<Out>(peers.length) : [];
      let succeeded = 0;
      let failed = 0;
      peers.forEach((peer, index) => {
        agent.send<Out>(peer, method, body, { ...callOptions, signal }).then(
          (answer) => {
            running--;
            if (mode === 'all') answers[index] = answer;
            else if (succeeded < needed) answers.push(answer);
            if (++succeeded === needed) resolve(answers);
          },
          (error: unknown) => {
            running--;
            failed++;
            if (mode === 'all' || peers.length - failed < needed) reject(toAgentError(error, 'UNAVAILABLE'));
          },
        );
      });
    });
  } finally {
    // Only calls still running need the cancel (an AgentError's stack is not free on the hot path).
    if (running > 0) controller.abort(new AgentError('CANCELLED', `${method}: the composed call has its result`));
    unlink();
  }
}

/**
 * Calls the peers one after another until one answers: the next is tried when a call fails with a retryable
 * error (UNAVAILABLE, RESOURCE_EXHAUSTED, CLOSED); any other error is the answer. `timeoutMs` bounds the whole
 * sequence, each call getting what is left of it.
 */
export async function fallback<Out = unknown>(agent: Agent, peers: readonly string[], method: string, body?: unknown, options: CallOptions = {}): Promise<Out> {
  needPeers(peers, 'fallback');
  const deadline = options.timeoutMs === undefined || options.timeoutMs === Number.POSITIVE_INFINITY ? undefined : Date.now() + options.timeoutMs;
  let last: AgentError | undefined;
  for (const peer of peers) {
    const timeoutMs = deadline === undefined ? options.timeoutMs : Math.max(0, deadline - Date.now());
    try {
      return await agent.send<Out>(peer, method, body, { ...options, timeoutMs });
    } catch (error) {
      last = toAgentError(error, 'UNAVAILABLE');
      if (!last.retryable) throw last;
    }
  }
  throw last!;
}

/**
 * Calls every peer at once and settles with the first call to settle, success or failure (use `parallel` with
 * `mode: 'first'` for the first success); the others are cancelled.
 */
export async function race<Out = unknown>(agent: Agent, peers: readonly string[], method: string, body?: unknown, options: CallOptions = {}): Promise<Out> {
  needPeers(peers, 'race');
  const { controller, unlink } = linkedController(options.signal);
  let running = peers.length;
  const settled = (): void => void running--;
  try {
    return await Promise.race(
      peers.map((peer) => {
        const call = agent.send<Out>(peer, method, body, { ...options, signal: controller.signal });
        call.then(settled, settled);
        return call;
      }),
    );
  } finally {
    if (running > 0) controller.abort(new AgentError('CANCELLED', `${method}: another peer answered first`));
    unlink();
  }
}

/**
 * The first of several streams to yield an item wins: its items follow, the other calls are cancelled. A
 * stream that fails before its first item is dropped; if all do, the last failure is thrown.
 */
export async function* raceStream<Out = unknown>(agent: Agent, peers: readonly string[], method: string, body?: unknown, options: CallOptions = {}): AsyncGenerator<Out, void, undefined> {
  needPeers(peers, 'raceStream');
  const links = peers.map(() => linkedController(options.signal));
  const iterators = peers.map((peer, i) => agent.stream<Out>(peer, method, body, { ...options, signal: links[i]!.controller.signal }));
  const cancel = (i: number, why: string): void => links[i]!.controller.abort(new AgentError('CANCELLED', `${method}: ${why}`));
  try {
    const firsts = iterators.map((iterator, index) =>
      iterator.next().then(
        (first) => ({ index, first, error: undefined }),
        (error: unknown) => ({ index, first: undefined, error }),
      ),
    );
    const waiting = new Map(firsts.map((p, i) => [i, p]));
    let winner: { index: number; first: IteratorResult<Out, void> } | undefined;
    let last: unknown;
    while (!winner && waiting.size > 0) {
      const next = await Promise.race(waiting.values());
      waiting.delete(next.index);
      if (next.first) winner = { index: next.index, first: next.first };
      else last = next.error;
    }
    if (!winner) throw toAgentError(last, 'UNAVAILABLE');
    for (const index of waiting.keys()) cancel(index, 'another peer answered first');
    if (winner.first.done) return;
    yield winner.first.value;
    const rest = iterators[winner.index]!;
    for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
  } finally {
    peers.forEach((_, i) => cancel(i, 'the composed stream ended'));
    links.forEach((link) => link.unlink());
  }
}
