import { Identity } from '@agentlink/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { clientOf, ipOf } from '../src/ip-limits.js';
import { cleanup, failure, rendezvous, wsClient } from './helpers.js';

afterEach(async () => {
  vi.useRealTimers();
  await cleanup();
});

describe('an IPv6 client of the rendezvous over ws', () => {
  it('is one client whatever its port: ws and HTTP/2 write an IPv6 remoteAddress with no brackets', () => {
    // `${socket.remoteAddress}:${socket.remotePort}`: the port was taken for part of the address, or (with no
    // `::` to absorb it) the whole text was the key, so each connection was a client of its own.
    expect(ipOf('::1:54321')).toBe('::1');
    expect(ipOf('2001:db8:1:2:a:b:c:d:443')).toBe('2001:db8:1:2:a:b:c:d');
    expect(ipOf('::ffff:192.0.2.7:5000')).toBe('::ffff:192.0.2.7');
    expect(clientOf('::ffff:192.0.2.7:5000')).toBe('192.0.2.7');
    expect(clientOf('2001:db8:1:2:a:b:c:d:443')).toBe(clientOf('2001:db8:1:2::9:80'));
    expect(clientOf('[2001:db8:1:2:a:b:c:d]:443')).toBe(clientOf('2001:db8:1:2:a:b:c:d:443'));
    expect(ipOf('192.0.2.7:4433')).toBe('192.0.2.7');
  });

  it('shares one request rate between its connections (real sockets on ::1)', async () => {
    const r = await rendezvous({ host: '::1', requestsPerSecondPerIp: 1 }); // a burst of 2
    const clients = await Promise.all([wsClient(), wsClient(), wsClient()]);
    await Promise.all(clients.map((client) => client.ping(r.address))); // three connections, three source ports
    vi.useFakeTimers({ toFake: ['performance'] }); // no token comes back while they ask
    const unknown = Identity.generate().id;
    const codes = [];
    for (const client of clients) codes.push((await failure(client.send(r.address, 'rdv.lookup', { agentId: unknown }))).code);
    expect(codes).toEqual(['NOT_FOUND', 'NOT_FOUND', 'RESOURCE_EXHAUSTED']);
  });
});
