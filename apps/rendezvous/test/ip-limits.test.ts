import { describe, expect, it } from 'vitest';
import { PerIpRate, clientOf, ipOf } from '../src/ip-limits.js';

describe('who a client is for the rendezvous per-IP limits', () => {
  it('is the IP of an IPv4 client and the /64 of an IPv6 one', () => {
    expect(ipOf('192.0.2.7:4433')).toBe('192.0.2.7');
    expect(clientOf('192.0.2.7:4433')).toBe('192.0.2.7');
    expect(clientOf('[::ffff:192.0.2.7]:4433')).toBe('192.0.2.7');
    expect(clientOf('[2001:db8:1:2::5]:4433')).toBe(clientOf('[2001:db8:1:2:ffff:1:2:3]:9'));
    expect(clientOf('[2001:db8:1:2::5]:4433')).not.toBe(clientOf('[2001:db8:1:3::5]:4433'));
  });

  it('shares one rate between the addresses of one IPv6 /64, so new addresses do not buy new tokens', () => {
    const rate = new PerIpRate(2); // a burst of 4
    const allowed = Array.from({ length: 10 }, (_, host) => rate.allow(`2001:db8:7:7::${host + 1}`)).filter(Boolean);
    expect(allowed).toHaveLength(4);
    expect(rate.allow('2001:db8:7:8::1')).toBe(true); // another network
    expect(rate.allow('192.0.2.1')).toBe(true);
  });
});
