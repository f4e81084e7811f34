import { describe, expect, it } from 'vitest';
import { canonicalIp, punchScope } from '../src/punch-scope.js';

const targets = [
  'quic://203.0.113.7:40000', // the peer's public mapping
  'quic://203.0.113.7:40001', // a predicted port there
  'quic://198.51.100.9:443', // a third party
  'quic://192.168.1.20:40000', // the peer's LAN address
  'quic://[2001:db8::5]:40000',
  'quic://[fe80::1]:40000',
];

describe('punchScope: where an agent answering a punch may send packets', () => {
  it('only to the IP the rendezvous saw the peer at, when that is not our own network', () => {
    expect(punchScope(targets, '203.0.113.7', '192.0.2.1')).toEqual(['quic://203.0.113.7:40000', 'quic://203.0.113.7:40001']);
    expect(punchScope(targets, '::ffff:203.0.113.7', undefined)).toEqual(['quic://203.0.113.7:40000', 'quic://203.0.113.7:40001']);
    expect(punchScope(targets, '2001:DB8::5', '192.0.2.1')).toEqual(['quic://[2001:db8::5]:40000']);
  });

  it('and to LAN addresses when the peer is behind our own public IP (same NAT)', () => {
    expect(punchScope(targets, '203.0.113.7', '::ffff:203.0.113.7')).toEqual([
      'quic://203.0.113.7:40000',
      'quic://203.0.113.7:40001',
      'quic://192.168.1.20:40000',
      'quic://[fe80::1]:40000',
    ]);
  });

  it('leaves the targets as they are when the rendezvous does not say (an older one), and drops what is not a URL', () => {
    expect(punchScope(targets, undefined, undefined)).toEqual(targets);
    expect(punchScope(['not a url', 'quic://203.0.113.7:1'], '203.0.113.7', undefined)).toEqual(['quic://203.0.113.7:1']);
  });

  it('compares IPs in one form', () => {
    expect(canonicalIp('[2001:DB8::1]')).toBe('2001:db8::1');
    expect(canonicalIp('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(canonicalIp('10.0.0.1')).toBe('10.0.0.1');
    // A URL writes a mapped address in hex: the same IPv4 address all the same.
    expect(canonicalIp(new URL('quic://[::ffff:203.0.113.7]:1').hostname)).toBe('203.0.113.7');
    expect(canonicalIp('[::ffff:a00:1]')).toBe('10.0.0.1');
    expect(canonicalIp('FE80::1%eth0')).toBe('fe80::1');
  });

  it('dials a link-local peer seen with its zone at its candidate (a URL holds no zone)', () => {
    expect(punchScope(['quic://[fe80::5]:40000', 'quic://[fe80::6]:40000'], 'fe80::5%eth0', undefined)).toEqual(['quic://[fe80::5]:40000']);
  });

  it('dials a candidate written as IPv4-mapped IPv6 (a peer whose STUN server answered from a dual-stack socket)', () => {
    const mapped = ['quic://[::ffff:203.0.113.7]:40000', 'quic://[::ffff:192.168.1.20]:40000', 'quic://[::ffff:198.51.100.9]:443'];
    expect(punchScope(mapped, '203.0.113.7', undefined)).toEqual(['quic://[::ffff:203.0.113.7]:40000']);
    expect(punchScope(mapped, '::ffff:203.0.113.7', '203.0.113.7')).toEqual(mapped.slice(0, 2));
  });
});
