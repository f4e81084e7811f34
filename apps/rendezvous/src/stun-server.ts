import { createSocket, type Socket } from 'node:dgram';
import type { PerIpRate } from './ip-limits.js';
import { answerStun, type StunOutcome } from './stun-answer.js';

export interface StunServerOptions {
  host: string;
  port: number;
  /** Shared by both STUN ports: one IP's datagrams are counted against one bucket, whichever port they hit. */
  rate: PerIpRate;
  /** Told what happened to each datagram and how many bytes went each way (the /metrics counters). */
  onDatagram(outcome: StunOutcome, receivedBytes: number, sentBytes: number): void;
}

export interface StunServer {
  port: number;
  close(): Promise<void>;
}

/**
 * A STUN server on one UDP port. Every datagram first takes a token of its source IP's bucket, before any
 * decoding: a flood from one address (or a spoofed victim's) gets no answers past the rate. The rest is
 * `answerStun`: Binding requests only, 420 for unknown comprehension-required attributes, FINGERPRINT checked.
 */
export async function startStunServer(options: StunServerOptions): Promise<StunServer> {
  const socket: Socket = createSocket({ type: options.host.includes(':') ? 'udp6' : 'udp4' });
  socket.on('message', (datagram, from) => {
    if (!options.rate.allow(from.address)) {
      options.onDatagram('rate', datagram.length, 0);
      return;
    }
    const { outcome, answer } = answerStun(datagram, from);
    options.onDatagram(outcome, datagram.length, answer?.length ?? 0);
    if (answer) socket.send(answer, from.port, from.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(options.port, options.host, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  // After binding, a send error (e.g. ICMP unreachable reported on the socket) must not take the service down.
  socket.on('error', () => undefined);
  let closed = false; // a second close() must not throw (dgram does)
  return {
    port: socket.address().port,
    close: () => new Promise<void>((resolve) => (closed ? resolve() : ((closed = true), socket.close(() => resolve())))),
  };
}
