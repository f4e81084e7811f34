import { describe, expect, it } from 'vitest';
import { ConnectionAdmission, resolveListenerLimits } from '../src/listener/listener-limits.js';
import { addressGroup } from '../src/listener/address-group.js';

describe('addressGroup', () => {
  it('keeps an IPv4 address, and counts an IPv4-mapped IPv6 address as that IPv4 address', () => {
    expect(addressGroup('192.0.2.7', 64)).toBe('192.0.2.7');
    expect(addressGroup('::ffff:192.0.2.7', 64)).toBe('192.0.2.7');
    expect(addressGroup('::FFFF:192.0.2.7', 64)).toBe('192.0.2.7');
  });

  it('cuts an IPv6 address to its network, whatever its spelling', () => {
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 64)).toBe('2001:db8:1:2::/64');
    expect(addressGroup('2001:DB8:1:2::9', 64)).toBe('2001:db8:1:2::/64');
    expect(addressGroup('[2001:db8:1:2::9]', 64)).toBe('2001:db8:1:2::/64');
    expect(addressGroup('fe80::1%eth0', 64)).toBe('fe80:0:0:0::/64');
    expect(addressGroup('::1', 64)).toBe('0:0:0:0::/64');
    expect(addressGroup('64:ff9b::192.0.2.1', 96)).toBe('64:ff9b:0:0:0:0::/96');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 61)).toBe('2001:db8:1:0::/61');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 1)).toBe('0::/1');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 128)).toBe('2001:db8:1:2:3:4:5:6');
  });

  it('leaves what is not an IP as it is', () => {
    expect(addressGroup('', 64)).toBe('');
    expect(addressGroup('unknown', 64)).toBe('unknown');
  });
});

describe('ConnectionAdmission per IP', () => {
  it('counts the addresses of one IPv6 /64 as one peer, and the next /64 as another', () => {
    const admission = new ConnectionAdmission({ maxConnectionsPerIp: 2 });
    const held = [admission.admit('2001:db8:1:2::1'), admission.admit('2001:db8:1:2:ffff::9')];
    expect(held.every((ticket) => typeof ticket === 'object')).toBe(true);
    expect(admission.admit('2001:db8:1:2:dead:beef:0:1')).toBe('max-connections-per-ip');
    expect(typeof admission.admit('2001:db8:1:3::1')).toBe('object');
    // A place given back is the network's again.
    (held[0] as { release(): void }).release();
    expect(typeof admission.admit('2001:db8:1:2::77')).toBe('object');
  });

  it('shares one rate between the addresses of one network', () => {
    const admission = new ConnectionAdmission({ newConnectionsPerIpPerSecond: 1 }); // a burst of 5
    for (let host = 1; host <= 5; host++) (admission.admit(`2001:db8:9:9::${host}`) as { release(): void }).release();
    expect(admission.admit('2001:db8:9:9::6')).toBe('ip-rate');
    expect(typeof admission.admit('2001:db8:9:a::1')).toBe('object');
  });

  it('counts each address with ipv6PrefixLength 128, and refuses a prefix length outside 1–128', () => {
    const admission = new ConnectionAdmission({ maxConnectionsPerIp: 1, ipv6PrefixLength: 128 });
    expect(typeof admission.admit('2001:db8::1')).toBe('object');
    expect(typeof admission.admit('2001:db8::2')).toBe('object');
    expect(admission.admit('2001:db8::1')).toBe('max-connections-per-ip');
    expect(resolveListenerLimits().ipv6PrefixLength).toBe(64);
    expect(() => resolveListenerLimits({ ipv6PrefixLength: 129 })).toThrow(/at most 128/);
    expect(() => resolveListenerLimits({ ipv6PrefixLength: 0 })).toThrow(/positive integer/);
  });
});
