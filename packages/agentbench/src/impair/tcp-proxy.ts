import { connect, createServer, type Socket } from 'node:net';
import { isLost, oneWayDelay, type Impairment } from './impairment.js';

const MSS = 1448;
const INITIAL_WINDOW = 10;
/** Linux's minimum retransmission timeout. */
const MIN_RTO_MS = 200;

interface Segment {
  seq: number;
  data: Buffer;
  /** Times this segment was lost: a second loss waits for the retransmission timer, with backoff. */
  losses: number;
}

/**
 * One direction of an emulated lossy TCP path. A userspace proxy cannot drop bytes of a TCP stream, so the
 * lossy leg is modelled: segments of MSS bytes are sent within a congestion window (slow start, then +1 per
 * window; halved once per round trip on loss, Reno-style); a lost segment is noticed after one round trip
 * (fast retransmit) and sent again, and the receiver delivers strictly in order — so one loss stalls everything
 * behind it (head-of-line blocking), as in real TCP. A lost retransmission, or a loss with too little data
 * behind it for duplicate ACKs (a tail loss), waits for the retransmission timeout (200 ms minimum, doubling)
 * and collapses the window to one segment.
 */
class LossyLink {
  private readonly queue: Segment[] = [];
  private readonly arrived = new Map<number, Buffer>();
  private nextSeq = 0;
  private nextDeliver = 0;
  private inFlight = 0;
  private cwnd = INITIAL_WINDOW;
  private ssthresh = Number.POSITIVE_INFINITY;
  private recoveryUntil = 0;

  constructor(
    private readonly impairment: Impairment,
    private readonly deliver: (data: Buffer) => void,
  ) {}

  push(data: Buffer): void {
    for (let offset = 0; offset < data.length; offset += MSS) this.queue.push({ seq: this.nextSeq++, data: data.subarray(offset, offset + MSS), losses: 0 });
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < Math.floor(this.cwnd) && this.queue.length > 0) {
      const segment = this.queue.shift()!;
      this.inFlight++;
      this.transmit(segment);
    }
  }

  private transmit(segment: Segment): void {
    if (isLost(this.impairment)) {
      segment.losses++;
      const tailLoss = this.queue.length + this.inFlight < 4;
      const rto = segment.losses > 1 || tailLoss;
      const rtt = 2 * this.impairment.delayMs;
      const wait = rto ? Math.max(MIN_RTO_MS, 2 * rtt) * 2 ** Math.min(5, segment.losses - 1) : 2 * oneWayDelay(this.impairment);
      setTimeout(() => this.onLoss(segment, rto), wait).unref();
      return;
    }
    const forward = oneWayDelay(this.impairment);
    setTimeout(() => this.arrive(segment), forward).unref();
    setTimeout(() => this.onAck(), forward + oneWayDelay(this.impairment)).unref();
  }

  private arrive(segment: Segment): void {
    this.arrived.set(segment.seq, segment.data);
    for (let data = this.arrived.get(this.nextDeliver); data; data = this.arrived.get(this.nextDeliver)) {
      this.arrived.delete(this.nextDeliver++);
      this.deliver(data);
    }
  }

  private onAck(): void {
    this.inFlight--;
    this.cwnd += this.cwnd < this.ssthresh ? 1 : 1 / this.cwnd;
    this.pump();
  }

  private onLoss(segment: Segment, timeout: boolean): void {
    const now = performance.now();
    if (timeout) {
      this.ssthresh = Math.max(2, this.cwnd / 2);
      this.cwnd = 1;
    } else if (now >= this.recoveryUntil) {
      this.ssthresh = Math.max(2, this.cwnd / 2);
      this.cwnd = this.ssthresh;
      this.recoveryUntil = now + 2 * this.impairment.delayMs;
    }
    this.transmit(segment); // still in flight: retransmitted
  }
}

/** A TCP proxy whose middle leg behaves like a lossy, delayed TCP path in both directions (see LossyLink). */
export async function tcpProxy(target: { host: string; port: number }, impairment: Impairment): Promise<{ port: number; close(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    const up = new LossyLink(impairment, (data) => upstream.destroyed || upstream.write(data));
    const down = new LossyLink(impairment, (data) => client.destroyed || client.write(data));
    client.on('data', (data) => up.push(data));
    upstream.on('data', (data) => down.push(data));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close() {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
