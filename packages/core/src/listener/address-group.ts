import { isIP } from 'node:net';

/**
 * The key a listener counts a peer's connections under: an IPv4 address as it is (an IPv4-mapped IPv6 address as
 * the IPv4 address it is), an IPv6 address by its first `ipv6PrefixLength` bits. One IPv6 host is usually handed a
 * whole /64, so counting its addresses one by one would give a single attacker 2^64 "IPs" and make every per-IP
 * limit meaningless. Anything that is not an IP (a socket that lost its address) is its own key.
 */
export function addressGroup(ip: string, ipv6PrefixLength: number): string {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const zone = bare.indexOf('%');
  const address = (zone >= 0 ? bare.slice(0, zone) : bare).toLowerCase();
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return mapped[1]!;
  if (ipv6PrefixLength >= 128) return address;
  const words = expandIpv6(address);
  const kept: string[] = [];
  for (let bit = 0, word = 0; bit < ipv6PrefixLength; bit += 16, word++) {
    const bits = Math.min(16, ipv6PrefixLength - bit);
    const mask = (0xffff << (16 - bits)) & 0xffff;
    kept.push((words[word]! & mask).toString(16));
  }
  return `${kept.join(':')}::/${ipv6PrefixLength}`;
}

/** The eight 16-bit words of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two words). */
function expandIpv6(address: string): number[] {
  let text = address;
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const headWords = head === '' ? [] : head.split(':');
  const restWords = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = rest === undefined ? 0 : 8 - headWords.length - restWords.length;
  return [...headWords, ...Array<string>(zeros).fill('0'), ...restWords].map((word) => parseInt(word, 16));
}
