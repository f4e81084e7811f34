import type { Logger } from './log.js';

/** Clients (reason and address) whose refusals are remembered between lines at most; the oldest are forgotten first. */
const MAX_TRACKED = 10_000;
/** One line per bound and client in this time at most. */
export const REFUSAL_LOG_EVERY_MS = 60_000;
/**
 * Lines in all in one such time at most (fixed): beyond, refusals are only counted, and the next time's first line
 * says how many. Without it, more clients than are remembered (an IPv6 /48 is 65,536 of them) had every refusal
 * logged, each client forgotten before its turn came round again. At most `MAX_TRACKED`, so no client is forgotten
 * within its minute.
 */
export const MAX_REFUSAL_LINES_PER_MINUTE = 1000;

/**
 * The warnings an operator reads when the rendezvous turns agents away by one of its bounds: until 2026-11-25 only
 * the counters said so, and the logs of a fleet refused behind one address showed nothing but fewer registrations.
 * One line per bound and client a minute at most, with how many were refused since its last line (a flood must not
 * flood the log), and for the listener's refusals before TLS (which know no agent), the counts of each interval.
 */
export class RefusalLog {
  private readonly clients = new Map<string, { at: number; since: number }>();
  private connections = new Map<string, number>();
  /** The current time's start, its lines so far, and the refusals not logged in it for want of lines. */
  private windowStart = Number.NEGATIVE_INFINITY;
  private lines = 0;
  private unlogged = 0;

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
    this.nextWindow(now);
    if (this.lines >= MAX_REFUSAL_LINES_PER_MINUTE) {
      this.unlogged++;
      return;
    }
    this.lines++;
    this.clients.delete(key);
    if (this.clients.size >= MAX_TRACKED) this.clients.delete(this.clients.keys().next().value!);
    this.clients.set(key, { at: now, since: 0 });
    // `refused` counts this one and those not logged since the last line about this client and bound.
    this.log('warn', 'refused', { reason, client, refused: (entry?.since ?? 0) + 1, error: message });
  }

  /** A new time of `MAX_REFUSAL_LINES_PER_MINUTE` lines once the last one is over; its unlogged refusals said. */
  private nextWindow(now: number): void {
    if (now - this.windowStart < REFUSAL_LOG_EVERY_MS) return;
    if (this.unlogged > 0) this.log('warn', 'refusals not logged', { refused: this.unlogged });
    this.windowStart = now;
    this.lines = 0;
    this.unlogged = 0;
  }

  /**
   * The listener's refusals so far (`agent.stats().refusals`, `stage:reason` → count): logs those of the connection
   * and handshake stages that grew since the last call.
   */
  listenerRefusals(counts: Readonly<Record<string, number>>): void {
    // Called every few seconds: the refusals a full time left unlogged are said even when no refusal follows.
    if (this.unlogged > 0) this.nextWindow(this.now());
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
