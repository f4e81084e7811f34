import type { Http2Session } from 'node:http2';
import { constants } from 'node:http2';

export interface KeepaliveOptions {
  /** Ping an idle session this often (default 15 s; 0 turns pings off). */
  intervalMs: number;
  /** A ping unanswered this long means the peer is gone (default 10 s). */
  timeoutMs: number;
}

/**
 * Pings the session while it is open so a vanished peer is noticed. Tolerant of servers that limit pings: a
 * GOAWAY with ENHANCE_YOUR_CALM ("too many pings", as gRPC servers send) doubles the interval for later sessions
 * to the same address instead of being treated as a failure.
 */
export class Keepalive {
  private readonly intervals = new Map<string, number>();

  constructor(private readonly options: KeepaliveOptions) {}

  watch(session: Http2Session, address: string): void {
    const interval = this.intervals.get(address) ?? this.options.intervalMs;
    if (interval <= 0) return;
    const timer = setInterval(() => {
      if (session.closed || session.destroyed) return;
      const deadline = setTimeout(() => session.destroy(new Error('keep-alive ping unanswered')), this.options.timeoutMs);
      deadline.unref();
      const sent = session.ping((error) => {
        clearTimeout(deadline);
        if (error && !session.destroyed) session.destroy(error);
      });
      if (!sent) clearTimeout(deadline); // too many outstanding pings: skip this round
    }, interval);
    timer.unref();
    session.once('close', () => clearInterval(timer));
    session.once('goaway', (code: number) => {
      if (code === constants.NGHTTP2_ENHANCE_YOUR_CALM) this.intervals.set(address, interval * 2);
    });
  }
}
