import type { Relays } from './relay.js';

/** Counters of the rendezvous, rendered as Prometheus text on /metrics. */
export class RendezvousMetrics {
  registrations = 0;
  heartbeats = 0;
  lookups = 0;
  punches = 0;
  private readonly rejections = new Map<string, number>();

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

  prometheus(registered: number, relays: Relays): string {
    const lines = [
      '# HELP rendezvous_registered_agents Agents with a live record.',
      '# TYPE rendezvous_registered_agents gauge',
      `rendezvous_registered_agents ${registered}`,
      '# HELP rendezvous_registrations_total Accepted registrations: new agents and heartbeats.',
      '# TYPE rendezvous_registrations_total counter',
      `rendezvous_registrations_total{kind="new"} ${this.registrations}`,
      `rendezvous_registrations_total{kind="heartbeat"} ${this.heartbeats}`,
      '# TYPE rendezvous_lookups_total counter',
      `rendezvous_lookups_total ${this.lookups}`,
      '# TYPE rendezvous_punches_total counter',
      `rendezvous_punches_total ${this.punches}`,
      '# HELP rendezvous_rejected_total Requests refused, by reason (forged, replayed, invalid, rate, per-ip, full).',
      '# TYPE rendezvous_rejected_total counter',
      ...[...this.rejections].map(([reason, n]) => `rendezvous_rejected_total{reason="${reason}"} ${n}`),
      '# TYPE rendezvous_relays_active gauge',
      `rendezvous_relays_active ${relays.count}`,
      '# TYPE rendezvous_relay_bytes_total counter',
      `rendezvous_relay_bytes_total ${relays.bytesRelayed}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}
