import { readFileSync } from 'node:fs';
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
    expect(addressGroup('fe80::1%eth0', 64)).toBe('fe80::/64');
    expect(addressGroup('::1', 64)).toBe('::/64');
    expect(addressGroup('64:ff9b::192.0.2.1', 96)).toBe('64:ff9b::/96');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 61)).toBe('2001:db8:1::/61');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 1)).toBe('::/1');
    expect(addressGroup('2001:db8:1:2:3:4:5:6', 128)).toBe('2001:db8:1:2:3:4:5:6');
  });

  it('gives every spelling of one address one key: an IPv4-mapped address in hex is its IPv4 address too', () => {
    // Before, only the dotted form was mapped: `::ffff:c000:207` went into the /64 of `::` (with every other IPv4
    // peer spelt so, and ::1), where the QUIC engine (Rust's to_canonical) counts it as 192.0.2.7.
    expect(addressGroup('::ffff:c000:207', 64)).toBe('192.0.2.7');
    expect(addressGroup('0:0:0:0:0:FFFF:192.0.2.7', 128)).toBe('192.0.2.7');
    expect(addressGroup('2001:DB8:0::1', 128)).toBe(addressGroup('2001:db8:0:0:0:0:0:1', 128));
    expect(addressGroup('2001:db8::1%eth0', 128)).toBe('2001:db8::1');
  });

  it("counts as the QUIC engine's address_group does (the vectors admission.rs reads too)", () => {
    const vectors = readFileSync(new URL('./address-groups.txt', import.meta.url), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => line.split(' ') as [string, string, string]);
    expect(vectors.length).toBeGreaterThan(100);
    for (const [address, prefix, group] of vectors) expect([address, prefix, addressGroup(address, Number(prefix))]).toEqual([address, prefix, group]);
  });

  it('puts two addresses in one group exactly when they share the prefix (property, any spelling)', () => {
    let seed = 18;
    const random = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const pick = <T>(choices: readonly T[]): T => choices[Math.floor(random() * choices.length)]!;
    const word = (): number => pick([0, 0, 0, 1, 0xffff, 0x2001, 0xdb8, Math.floor(random() * 0x10000)]);
    /** One of the many ways to write `words`: zeros compressed anywhere, leading zeros, upper case, a dotted tail, a zone. */
    const spell = (words: number[]): string => {
      let parts = words.map((w) => (random() < 0.2 ? w.toString(16).padStart(4, '0') : w.toString(16)));
      if (random() < 0.3) parts = [...parts.slice(0, 6), `${words[6]! >> 8}.${words[6]! & 255}.${words[7]! >> 8}.${words[7]! & 255}`];
      let text = parts.join(':');
      const zeroRuns = [...text.matchAll(/(^|:)(0+(:0+)+)(?=:|$)/g)];
      if (zeroRuns.length > 0 && random() < 0.7) {
        const run = pick(zeroRuns);
        const start = run.index + run[1]!.length;
        text = `${text.slice(0, start)}${start === 0 ? ':' : ''}${text.slice(start + run[2]!.length)}`;
        if (text.endsWith(':') && !text.endsWith('::')) text += ':';
        if (!text.includes('::')) text = text.replace(/^:/, '::');
      }
      if (random() < 0.3) text = text.toUpperCase();
      return random() < 0.1 ? `${text}%eth0` : text;
    };
    const bits = (words: number[]): bigint => words.reduce((sum, w) => (sum << 16n) | BigInt(w), 0n);
    const mapped = (words: number[]): boolean => words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff;
    const wrong: unknown[] = [];
    for (let round = 0; round < 3000; round++) {
      const a = Array.from({ length: 8 }, word);
      // b: a with some of its low bits changed, or another address, or a's IPv4-mapped twin.
      const b = random() < 0.6 ? a.map((w, i) => (i >= Math.floor(random() * 8) && random() < 0.5 ? word() : w)) : Array.from({ length: 8 }, word);
      if (random() < 0.2) [a[0], a[1], a[2], a[3], a[4], a[5]] = [0, 0, 0, 0, 0, 0xffff];
      const prefix = 1 + Math.floor(random() * 128);
      const shift = BigInt(128 - prefix);
      const same = mapped(a) || mapped(b) ? mapped(a) && mapped(b) && a[6] === b[6] && a[7] === b[7] : bits(a) >> shift === bits(b) >> shift;
      const [spellA, spellB] = [spell(a), spell(b)];
      const groupA = addressGroup(spellA, prefix);
      if ((groupA === addressGroup(spellB, prefix)) !== same) wrong.push({ spellA, spellB, prefix, same });
      if (groupA !== addressGroup(a.map((w) => w.toString(16)).join(':'), prefix)) wrong.push({ spellA, prefix });
    }
    expect(wrong).toEqual([]);
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
