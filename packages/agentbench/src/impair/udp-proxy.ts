import { createSocket, type Socket } from 'node:dgram';
import { isLost, oneWayDelay, type Impairment } from './impairment.js';

/**
 * A UDP relay that drops and delays datagrams in both directions, so QUIC meets real loss and reordering and
 * its own congestion control reacts. One upstream socket per client address, like a NAT.
 */
export async function udpProxy(target: { host: string; port: number }, impairment: Impairment): Promise<{ port: number; close(): void }> {
  const front = createSocket('udp4');
  const upstreams = new Map<string, Socket>();
  let closed = false;
  // Jitter varies the delay but keeps each direction in order, like a queue on the path (and like the TCP
  // model): heavy reordering would make QUIC see spurious losses that the TCP model never shows.
  const lastRelease = { up: 0, down: 0 };
  const forward = (direction: 'up' | 'down', send: () => void): void => {
    if (isLost(impairment)) return;
    const now = performance.now();
    const release = Math.max(lastRelease[direction], now + oneWayDelay(impairment));
    lastRelease[direction] = release;
    setTimeout(() => closed || send(), release - now).unref();
  };
  front.on('message', (message, client) => {
    const key = `${client.address}:${client.port}`;
    let upstream = upstreams.get(key);
    if (!upstream) {
      const socket = createSocket('udp4');
      socket.bind(0, '127.0.0.1');
      socket.on('message', (reply) => forward('down', () => front.send(reply, client.port, client.address)));
      upstreams.set(key, (upstream = socket));
    }
    const socket = upstream;
    forward('up', () => socket.send(message, target.port, target.host));
  });
  await new Promise<void>((resolve) => front.bind(0, '127.0.0.1', resolve));
  return {
    port: front.address().port,
    close() {
      closed = true;
      front.close();
      for (const socket of upstreams.values()) socket.close();
    },
  };
}
