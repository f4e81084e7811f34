import { connect } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, rendezvous } from './helpers.js';

afterEach(cleanup);

/**
 * Before the ws listener closed such sockets at the end of the handshake, one IP held 939 of them after 45 s,
 * each for node's header timeout (76-88 s).
 */
describe('rendezvous wss port and TLS clients without a certificate', () => {
  it('closes a TLS client without a certificate promptly after its handshake', async () => {
    const r = await rendezvous();
    const { port } = new URL(r.address.slice(r.address.indexOf('@') + 1));
    const socket = connect({ host: '127.0.0.1', port: Number(port), rejectUnauthorized: false, minVersion: 'TLSv1.3' });
    socket.on('error', () => undefined); // a reset is as good as a close here
    socket.resume(); // read what the server says (its 401), so its end reaches us
    const events: string[] = [];
    socket.once('secureConnect', () => events.push('handshake'));
    // Generous: node's header timeout would hold such a socket for 76-88 s.
    const verdict = await new Promise<string>((resolve) => {
      const bound = setTimeout(() => resolve('still open after 5 s'), 5000);
      socket.once('close', () => {
        clearTimeout(bound);
        resolve('closed');
      });
    });
    socket.destroy();
    // Closed at the end of the handshake (or refused during it): either way the close comes first, not the bound.
    expect([...events, verdict].filter((event) => event !== 'handshake')).toEqual(['closed']);
    expect(r.agent.stats().refusals['handshake:no-certificate']).toBe(1);
  });
});
