import { CallMetrics, type PoolStatsSource } from '@agentlink/core';
import type { ClusterBus } from './cluster-bus.js';
import type { Relays } from './relay.js';
import type { RendezvousHealth } from './rendezvous.js';
import type { StunOutcome } from './stun-answer.js';

/**
 * Counters of the rendezvous, rendered as Prometheus text on /metrics (every family with HELP and TYPE, as
 * `promtool check metrics` wants), followed by core's call metrics of the rendezvous agent: the calls it
 * serves, the commands it sends and, from `agent.stats()`, the peers it refused (`agentlink_refusals_total`).
 */
export class RendezvousMetrics {
  registrations = 0;
  heartbeats = 0;
  lookups = 0;
  punches = 0;
  /** Install `calls.interceptor` and `calls.inboundInterceptor` on the rendezvous agent. */
  readonly calls = new CallMetrics();
  private readonly rejections = new Map<string, number>();
  private readonly stun = new Map<StunOutcome, number>();
  private stunBytes = { received: 0, sent: 0 };

  registered(isNew: boolean): void {
    if (isNew) this.registrations++;
    else this.heartbeats++;
  }

  rejected(reason: string): void {
    this.rejections.set(reason, (this.rejections.get(reason) ?? 0) + 1);
  }

  rejectedCount(reason: string): number {
    return this.rejections.get(reason) ?? 0;
  }

  stunDatagram(outcome: StunOutcome, receivedBytes: number, sentBytes: number): void {
    this.stun.set(outcome, (this.stun.get(outcome) ?? 0) + 1);
    this.stunBytes.received += receivedBytes;
    this.stunBytes.sent += sentBytes;
  }

  stunCount(outcome: StunOutcome): number {
    return this.stun.get(outcome) ?? 0;
  }

  prometheus(health: RendezvousHealth, relays: Relays, agent?: PoolStatsSource, bus?: ClusterBus): string {
    const lines: string[] = [];
    const family = (name: string, type: 'counter' | 'gauge', help: string, ...samples: string[]): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples);
    };
    family(
      'rendezvous_store_up',
      'gauge',
      'Whether this instance reaches its registry store (1; always 1 in memory, 0 while Valkey/Redis is unreachable).',
      `rendezvous_store_up{store="${health.store}"} ${health.ok ? 1 : 0}`,
    );
    if (health.registered !== undefined) {
      family('rendezvous_registered_agents', 'gauge', 'Agents with a live record (every instance\'s, when the store is shared).', `rendezvous_registered_agents ${health.registered}`);
    }
    if (bus) {
      family('rendezvous_cluster_instances', 'gauge', 'Live instances sharing this store.', `rendezvous_cluster_instances ${health.instances ?? 0}`);
      family(
        'rendezvous_cluster_requests_total',
        'counter',
        'Punch requests passed between instances (sent to the instance holding the target, served for another).',
        `rendezvous_cluster_requests_total{direction="sent"} ${bus.requestsSent}`,
        `rendezvous_cluster_requests_total{direction="served"} ${bus.requestsServed}`,
      );
    }
    family(
      'rendezvous_registrations_total',
      'counter',
      'Accepted registrations: new agents and heartbeats.',
      `rendezvous_registrations_total{kind="new"} ${this.registrations}`,
      `rendezvous_registrations_total{kind="heartbeat"} ${this.heartbeats}`,
    );
    family('rendezvous_lookups_total', 'counter', 'Lookups of an agent record.', `rendezvous_lookups_total ${this.lookups}`);
    family('rendezvous_punches_total', 'counter', 'Hole punches coordinated.', `rendezvous_punches_total ${this.punches}`);
    family(
      'rendezvous_rejected_total',
      'counter',
      'Control requests and connections refused, by reason (forged, replayed, invalid, rate, target-rate, per-ip, full, relay-limit, connections; stored-forged: a record in the store that failed verification on read).',
      ...[...this.rejections].map(([reason, n]) => `rendezvous_rejected_total{reason="${reason}"} ${n}`),
    );
    family('rendezvous_relays_active', 'gauge', 'Relays open now.', `rendezvous_relays_active ${relays.count}`);
    family('rendezvous_relay_bytes_total', 'counter', 'Bytes relayed, both directions.', `rendezvous_relay_bytes_total ${relays.bytesRelayed}`);
    family(
      'rendezvous_stun_datagrams_total',
      'counter',
      'STUN datagrams received, by outcome: answered, unknown-attribute (answered 420); dropped: rate, too-large, malformed, not-binding-request, bad-fingerprint.',
      ...[...this.stun].map(([outcome, n]) => `rendezvous_stun_datagrams_total{outcome="${outcome}"} ${n}`),
    );
    family(
      'rendezvous_stun_bytes_total',
      'counter',
      'STUN bytes received and sent (their ratio is the reflection factor).',
      `rendezvous_stun_bytes_total{direction="received"} ${this.stunBytes.received}`,
      `rendezvous_stun_bytes_total{direction="sent"} ${this.stunBytes.sent}`,
    );
    return `${lines.join('\n')}\n${this.calls.prometheus(agent)}`;
  }
}
