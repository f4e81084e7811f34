import type { Interceptor } from '../agent/interceptor.js';
import type { PoolStats } from '../agent/channel-pool.js';

/** Upper bounds of the latency histogram's buckets, in seconds (Prometheus convention). */
export const LATENCY_BUCKETS_SECONDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Distinct method labels kept; calls to further methods are counted under `method="other"`. */
const MAX_METHODS = 500;

class MethodMetrics {
  readonly outcomes = new Map<string, number>();
  /** Non-cumulative counts per bucket; the last slot is +Inf. */
  readonly buckets = new Array<number>(LATENCY_BUCKETS_SECONDS.length + 1).fill(0);
  durationSum = 0;
  items = 0;

  record(outcome: string, seconds: number): void {
    this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1);
    let i = 0;
    while (i < LATENCY_BUCKETS_SECONDS.length && seconds > LATENCY_BUCKETS_SECONDS[i]!) i++;
    this.buckets[i]!++;
    this.durationSum += seconds;
  }
}

/** What {@link CallMetrics.snapshot} returns: counts and latency histograms per method and direction. */
export interface MetricsSnapshot {
  inFlight: number;
  methods: Record<string, { outcomes: Record<string, number>; items: number; count: number; durationSumSeconds: number }>;
  /** The same for calls this agent served (through `inboundInterceptor`). */
  served: { inFlight: number; methods: MetricsSnapshot['methods'] };
}

/** Where gauges of the pool come from: an Agent (its `stats()`), with the peers it refused when it counts them. */
export interface PoolStatsSource {
  /** The pool's current figures (and refusals by reason, when the source counts them). */
  stats(): PoolStats & { refusals?: Record<string, number> };
}

/** Calls of one direction: by method and outcome, latency, items and calls in flight. */
class DirectionMetrics {
  readonly interceptor: Interceptor;
  readonly methods = new Map<string, MethodMetrics>();
  inFlight = 0;

  constructor() {
    this.interceptor = (dispatch) => (call, handler) => {
      const metrics = this.method(call.method);
      const started = performance.now();
      this.inFlight++;
      let done = false;
      const finish = (outcome: string): void => {
        if (done) return;
        done = true;
        this.inFlight--;
        metrics.record(outcome, (performance.now() - started) / 1000);
      };
      dispatch(call, {
        onStart: (control) => handler.onStart?.(control),
        onResponse: (body) => handler.onResponse?.(body),
        onItem: (item, size) => {
          metrics.items++;
          return handler.onItem?.(item, size);
        },
        onEnd: () => {
          finish('OK');
          handler.onEnd();
        },
        onError: (error) => {
          finish(error.code);
          handler.onError(error);
        },
      });
    };
  }

  snapshot(): MetricsSnapshot['methods'] {
    const methods: MetricsSnapshot['methods'] = {};
    for (const [name, m] of this.methods) {
      const outcomes = Object.fromEntries(m.outcomes);
      const count = [...m.outcomes.values()].reduce((a, b) => a + b, 0);
      methods[name] = { outcomes, items: m.items, count, durationSumSeconds: m.durationSum };
    }
    return methods;
  }

  /** Exposition lines of this direction's families, named `agentlink_<prefix>…`. */
  render(lines: string[], prefix: string, what: string): void {
    const family = (name: string, type: string, help: string): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    family(`agentlink_${prefix}calls_total`, 'counter', `${what} that ended, by method and outcome (OK or error code).`);
    for (const [method, m] of this.methods) {
      for (const [code, n] of m.outcomes) lines.push(`agentlink_${prefix}calls_total{method=${label(method)},code="${code}"} ${n}`);
    }
    const histogram = `agentlink_${prefix}call_duration_seconds`;
    family(histogram, 'histogram', `Latency of ${what.toLowerCase()}, from dispatch to end.`);
    for (const [method, m] of this.methods) {
      let cumulative = 0;
      LATENCY_BUCKETS_SECONDS.forEach((le, i) => {
        cumulative += m.buckets[i]!;
        lines.push(`${histogram}_bucket{method=${label(method)},le="${le}"} ${cumulative}`);
      });
      cumulative += m.buckets[LATENCY_BUCKETS_SECONDS.length]!;
      lines.push(`${histogram}_bucket{method=${label(method)},le="+Inf"} ${cumulative}`);
      lines.push(`${histogram}_sum{method=${label(method)}} ${m.durationSum}`);
      lines.push(`${histogram}_count{method=${label(method)}} ${cumulative}`);
    }
    family(`agentlink_${prefix}stream_items_total`, 'counter', `Stream items of ${what.toLowerCase()}, by method.`);
    for (const [method, m] of this.methods) lines.push(`agentlink_${prefix}stream_items_total{method=${label(method)}} ${m.items}`);
    family(`agentlink_${prefix}calls_in_flight`, 'gauge', `${what} dispatched and not yet ended.`);
    lines.push(`agentlink_${prefix}calls_in_flight ${this.inFlight}`);
  }

  private method(name: string): MethodMetrics {
    let metrics = this.methods.get(name);
    if (!metrics) {
      const key = this.methods.size >= MAX_METHODS ? 'other' : name;
      metrics = this.methods.get(key) ?? new MethodMetrics();
      this.methods.set(key, metrics);
    }
    return metrics;
  }
}

/**
 * Call metrics: calls by method and outcome (`OK` or the error code), latency histograms, stream items and calls
 * in flight; with an agent given to `prometheus()`, also its queue depth by priority, channels by kind and the
 * peers it refused. Install `metrics.interceptor` on the agent (`interceptors`) for the calls it makes and
 * `metrics.inboundInterceptor` (`inboundInterceptors`) for the calls it serves; read `snapshot()` or serve
 * `prometheus()` on `/metrics`.
 */
export class CallMetrics {
  private readonly outbound = new DirectionMetrics();
  private readonly inbound = new DirectionMetrics();
  /** For `interceptors`: the calls this agent makes. */
  readonly interceptor: Interceptor = this.outbound.interceptor;
  /** For `inboundInterceptors`: the calls this agent serves. */
  readonly inboundInterceptor: Interceptor = this.inbound.interceptor;

  /** The figures so far, as plain data. */
  snapshot(): MetricsSnapshot {
    return {
      inFlight: this.outbound.inFlight,
      methods: this.outbound.snapshot(),
      served: { inFlight: this.inbound.inFlight, methods: this.inbound.snapshot() },
    };
  }

  /** The Prometheus text exposition format (version 0.0.4). */
  prometheus(pool?: PoolStatsSource): string {
    const lines: string[] = [];
    const family = (name: string, type: string, help: string): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    this.outbound.render(lines, '', 'Outgoing calls');
    this.inbound.render(lines, 'served_', 'Served calls');
    if (pool) {
      const stats = pool.stats();
      family('agentlink_pending_calls', 'gauge', 'Calls waiting for channel capacity, by priority.');
      for (const [priority, n] of Object.entries(stats.pendingCalls)) lines.push(`agentlink_pending_calls{priority="${priority}"} ${n}`);
      family('agentlink_channels', 'gauge', 'Open channels, by kind.');
      for (const [kind, n] of Object.entries(stats.channelsByKind)) lines.push(`agentlink_channels{kind=${label(kind)}} ${n}`);
      if (stats.refusals) {
        family('agentlink_refusals_total', 'counter', 'Peers turned away, by stage (connection, handshake, authorization, stream) and reason.');
        for (const [key, n] of Object.entries(stats.refusals)) {
          const [stage, reason] = key.split(':', 2) as [string, string];
          lines.push(`agentlink_refusals_total{stage=${label(stage)},reason=${label(reason ?? '')}} ${n}`);
        }
      }
    }
    return `${lines.join('\n')}\n`;
  }
}

/** A label value, quoted and escaped as the exposition format requires. */
function label(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}
