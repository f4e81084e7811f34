import type { Logger } from './log.js';

/** Clients (reason and address) whose refusals are remembered between lines at most; the oldest are forgotten first. */
const MAX_TRACKED = 10_000;
/** One line per bound and client in this time at most. */
export const REFUSAL_LOG_EVERY_MS = 60_000;

/**
 * The warnings an operator reads when the rendezvous turns agents away by one of its bounds: until 2026-11-25 only
 * the counters said so, and the logs of a fleet refused behind one address showed nothing but fewer registrations.
 * One line per bound and client a minute at most, with how many were refused since its last line (a flood must not
 * flood the log), and for the listener's refusals before TLS (which know no agent), the counts of each interval.
 */
export class RefusalLog {
  private readonly clients = new Map<string, { at: number; since: number }>();
  private connections = new Map<string, number>();

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** An agent at `client` was refused by bound `reason` (`message` is what it was told). */
  refused(reason: string, client: string, message: string): void {
    const key = `${reason} ${client}`;
    const entry = this.clients.get(key);
    const now = this.now();
    if (entry && now - entry.at < REFUSAL_LOG_EVERY_MS) {
      entry.since++;
      return;
    }
    this.clients.delete(key);
    if (this.clients.size >= MAX_TRACKED) this.clients.delete(this.clients.keys().next().value!);
    this.clients.set(key, { at: now, since: 0 });
    // `refused` counts this one and those not logged since the last line about this client and bound.
    this.log('warn', 'refused', { reason, client, refused: (entry?.since ?? 0) + 1, error: message });
  }

  /**
   * The listener's refusals so far (`agent.stats().refusals`, `stage:reason` → count): logs those of the connection
   * and handshake stages that grew since the last call.
   */
  listenerRefusals(counts: Readonly<Record<string, number>>): void {
    const next = new Map<string, number>();
    for (const [key, count] of Object.entries(counts)) {
      if (!key.startsWith('connection:') && !key.startsWith('handshake:')) continue;
      next.set(key, count);
      const grown = count - (this.connections.get(key) ?? 0);
      if (grown > 0) this.log('warn', 'connections refused', { reason: key, refused: grown });
    }
    this.connections = next;
  }
}
