import { EventEmitter } from 'node:events';
import { positiveInteger, positiveNumber } from '../util/options.js';
import { AgentError, type ErrorCode } from '../errors.js';
import { diagnosticChannels } from '../diagnostics.js';
import type { AgentId } from '../identity/agent-id.js';
import { tapHandler, type Interceptor } from '../agent/interceptor.js';

/** A breaker's state: `closed` (calls pass), `open` (calls fail fast), `half-open` (one probe passes). */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Options of {@link circuitBreaker}: when to open, how long to stay open. */
export interface CircuitBreakerOptions {
  /** Consecutive failures that open a peer's circuit (default 5). */
  failureThreshold?: number;
  /** How long an open circuit rejects calls before letting trial calls through (default 10 s). */
  openMs?: number;
  /** Trial calls allowed at once while half-open (default 1). */
  halfOpenCalls?: number;
  /** Codes that count as the peer failing (default UNAVAILABLE, DEADLINE_EXCEEDED, CLOSED, RESOURCE_EXHAUSTED). */
  failOn?: readonly ErrorCode[];
}

/** A breaker's change of state, published on `agentlink:breaker:state`. */
export interface BreakerStateChange {
  peer: AgentId;
  from: BreakerState;
  to: BreakerState;
}

interface PeerCircuit {
  state: BreakerState;
  failures: number;
  openedAt: number;
  trials: number;
}

const DEFAULT_FAIL_ON: readonly ErrorCode[] = ['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'CLOSED', 'RESOURCE_EXHAUSTED'];

/**
 * A circuit breaker per peer: after `failureThreshold` consecutive failures the peer's calls fail at once with
 * UNAVAILABLE for `openMs`; then up to `halfOpenCalls` trial calls go through, and the first result closes the
 * circuit (success) or opens it again (failure). Errors the peer's handler raised on purpose (NO_HANDLER,
 * INVALID_ARGUMENT, …) and the caller's own cancellations do not count. Emits `state` events
 * ({@link BreakerStateChange}) and publishes them on diagnostics_channel `agentlink:breaker:state`.
 */
export class CircuitBreaker extends EventEmitter<{ state: [BreakerStateChange] }> {
  readonly interceptor: Interceptor;
  private readonly circuits = new Map<AgentId, PeerCircuit>();
  private readonly failureThreshold: number;
  private readonly openMs: number;
  private readonly halfOpenCalls: number;
  private readonly failOn: ReadonlySet<ErrorCode>;

  constructor(options: CircuitBreakerOptions = {}) {
    super();
    this.failureThreshold = positiveInteger('circuitBreaker failureThreshold', options.failureThreshold, 5);
    this.openMs = positiveNumber('circuitBreaker openMs', options.openMs, 10_000);
    this.halfOpenCalls = positiveInteger('circuitBreaker halfOpenCalls', options.halfOpenCalls, 1);
    this.failOn = new Set(options.failOn ?? DEFAULT_FAIL_ON);
    this.interceptor = (dispatch) => (call, handler) => {
      const circuit = this.admit(call.peer);
      if (circuit instanceof AgentError) {
        handler.onStart?.({ abort: () => undefined });
        return handler.onError(circuit);
      }
      const trial = circuit?.state === 'half-open';
      let settled = false;
      dispatch(
        call,
        tapHandler(handler, {
          onEnd: () => {
            if (!settled) this.record(call.peer, undefined, trial);
            settled = true;
          },
          onError: (error) => {
            if (!settled) this.record(call.peer, error, trial);
            settled = true;
          },
        }),
      );
    };
  }

  /** The state of `peer`'s circuit (closed when it has none yet). */
  state(peer: AgentId): BreakerState {
    const circuit = this.circuits.get(peer);
    if (circuit?.state === 'open' && Date.now() - circuit.openedAt >= this.openMs) return 'half-open';
    return circuit?.state ?? 'closed';
  }

  /** Lets a call through (returning its circuit, if any), or the error to fail it with. */
  private admit(peer: AgentId): PeerCircuit | undefined | AgentError {
    const circuit = this.circuits.get(peer);
    if (!circuit || circuit.state === 'closed') return circuit;
    if (circuit.state === 'open') {
      const waited = Date.now() - circuit.openedAt;
      if (waited < this.openMs) {
        return new AgentError('UNAVAILABLE', `circuit open for ${peer}: ${circuit.failures} failures in a row; next trial in ${Math.ceil(this.openMs - waited)} ms`);
      }
      this.move(peer, circuit, 'half-open');
    }
    if (circuit.trials >= this.halfOpenCalls) return new AgentError('UNAVAILABLE', `circuit half-open for ${peer}: a trial call is in flight`);
    circuit.trials++;
    return circuit;
  }

  private record(peer: AgentId, error: AgentError | undefined, trial: boolean): void {
    const failed = error !== undefined && this.failOn.has(error.code);
    let circuit = this.circuits.get(peer);
    if (trial && circuit) circuit.trials--;
    if (!failed) {
      // The peer answered (even with a handler error): it is reachable again. A caller's cancel tells nothing.
      if (circuit && circuit.state === 'half-open' && error?.code !== 'CANCELLED') this.move(peer, circuit, 'closed');
      if (circuit && circuit.state === 'closed') this.circuits.delete(peer);
      return;
    }
    if (!circuit) this.circuits.set(peer, (circuit = { state: 'closed', failures: 0, openedAt: 0, trials: 0 }));
    circuit.failures++;
    if (circuit.state === 'half-open' || (circuit.state === 'closed' && circuit.failures >= this.failureThreshold)) {
      circuit.openedAt = Date.now();
      this.move(peer, circuit, 'open');
    }
  }

  private move(peer: AgentId, circuit: PeerCircuit, to: BreakerState): void {
    const from = circuit.state;
    if (from === to) return;
    circuit.state = to;
    if (to === 'closed') circuit.failures = 0;
    const change: BreakerStateChange = { peer, from, to };
    if (diagnosticChannels.breakerState.hasSubscribers) diagnosticChannels.breakerState.publish(change);
    this.emit('state', change);
  }
}

/** A circuit breaker's interceptor; keep the breaker (`new CircuitBreaker()`) to watch its events. */
export function circuitBreaker(options: CircuitBreakerOptions = {}): Interceptor {
  return new CircuitBreaker(options).interceptor;
}
