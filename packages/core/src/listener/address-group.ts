import { isIP } from 'node:net';

/**
 * The key a listener counts a peer's connections under: an IPv4 address as it is (an IPv4-mapped IPv6 address as
 * the IPv4 address it is), an IPv6 address by its first `ipv6PrefixLength` bits. One IPv6 host is usually handed a
 * whole /64, so counting its addresses one by one would give a single attacker 2^64 "IPs" and make every per-IP
 * limit meaningless. Anything that is not an IP (a socket that lost its address) is its own key.
 *
 * Every spelling of one address gives one key (`::ffff:c000:207` is 192.0.2.7, `2001:DB8:0::1` is `2001:db8::1`),
 * written as the QUIC engine's `address_group` (admission.rs) writes it: an IPv6 network in RFC 5952's form
 * with `/length` (none at 128), so the two count the same peers alike (test/address-groups.txt is read by both).
 */
export function addressGroup(ip: string, ipv6PrefixLength: number): string {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const zone = bare.indexOf('%');
  const address = (zone >= 0 ? bare.slice(0, zone) : bare).toLowerCase();
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6) return ip;
  // How node writes every IPv4 peer of a dual-stack listener, on each connection: no need to parse it (10x faster).
  if (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4) return address.slice(7);
  const words = expandIpv6(address);
  if (words.slice(0, 5).every((word) => word === 0) && words[5] === 0xffff) {
    return `${words[6]! >> 8}.${words[6]! & 0xff}.${words[7]! >> 8}.${words[7]! & 0xff}`;
  }
  if (ipv6PrefixLength >= 128) return formatIpv6(words);
  const network = words.map((word, index) => {
    const bits = Math.min(16, Math.max(0, ipv6PrefixLength - index * 16));
    return word & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${formatIpv6(network)}/${ipv6PrefixLength}`;
}

/** The eight 16-bit words of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two words). */
function expandIpv6(address: string): number[] {
  let text = address;
  const tail = text.includes('.') ? /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text) : null;
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  // One pass over the characters (it runs per connection): the words written, and where `::` stood.
  const written: number[] = [];
  let gap = -1;
  let word = 0;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 58) {
      word = word * 16 + (c <= 57 ? c - 48 : c - 87); // valid and lower-case: 0-9, a-f
      digits++;
      continue;
    }
    if (digits > 0) written.push(word);
    word = 0;
    digits = 0;
    if (text.charCodeAt(i + 1) === 58) {
      gap = written.length;
      i++;
    }
  }
  if (digits > 0) written.push(word);
  if (gap < 0) return written;
  const words = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let i = 0; i < gap; i++) words[i] = written[i]!;
  for (let i = gap; i < written.length; i++) words[8 - written.length + i] = written[i]!;
  return words;
}

/** RFC 5952: lower-case hex without leading zeros, the longest run of two or more zero words (the first) as `::`. */
function formatIpv6(words: number[]): string {
  let start = -1;
  let length = 0;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > length && j - i > 1) [start, length] = [i, j - i];
    i = j > i ? j : i + 1;
  }
  let text = '';
  for (let i = 0; i < 8; i++) {
    if (i === start) {
      text += '::';
      i += length - 1;
    } else text += (text === '' || text.endsWith(':') ? '' : ':') + words[i]!.toString(16);
  }
  return text;
}
