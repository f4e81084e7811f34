import { BlockList, isIP } from 'node:net';

/** Addresses that only mean something inside one network: loopback, private, CGNAT, link-local, unique-local. */
const LOCAL_NETWORKS = new BlockList();
for (const [prefix, bits] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16]] as const) {
  LOCAL_NETWORKS.addSubnet(prefix, bits, 'ipv4');
}
LOCAL_NETWORKS.addAddress('::1', 'ipv6');
LOCAL_NETWORKS.addSubnet('fc00::', 7, 'ipv6');
LOCAL_NETWORKS.addSubnet('fe80::', 10, 'ipv6');

/** An IP as a socket or a URL spells it, in one form: no brackets or zone, lower case, IPv4-mapped IPv6 as IPv4. */
export function canonicalIp(ip: string): string {
  // A socket names a link-local peer with its zone (fe80::1%eth0); a URL cannot carry one, so candidates never do.
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1]!;
  // A URL spells a mapped address in hex (new URL('quic://[::ffff:1.2.3.4]:1').hostname is '[::ffff:102:304]'):
  // every candidate comes through a URL, so without this one mapped candidate never matched where it was seen.
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(bare);
  if (!hex) return bare;
  const [high, low] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

function isLocalNetwork(ip: string): boolean {
  const family = isIP(ip);
  return family !== 0 && LOCAL_NETWORKS.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The punch targets an agent may dial when the rendezvous asks it to answer a peer's punch. A record's candidates
 * are whatever its signer wrote: without this, any stranger with a key could register a record naming a third
 * party and have every agent it punches towards send that party QUIC Initials (1,200 bytes each, retransmitted,
 * up to 16 candidates and 64 predicted ports per punch). So a target is dialled only if it is at the IP the
 * rendezvous saw the peer register from (`seenAt`: its public mapping), or, when that IP is our own public one
 * (both behind the same NAT), a LAN address. A rendezvous that does not say where it saw the peer (an older one)
 * leaves the targets as they are.
 */
export function punchScope(targets: readonly string[], seenAt: string | undefined, ownIp: string | undefined): string[] {
  if (seenAt === undefined) return [...targets];
  const seen = canonicalIp(seenAt);
  const sameNetwork = ownIp !== undefined && canonicalIp(ownIp) === seen;
  return targets.filter((url) => {
    let host: string;
    try {
      host = canonicalIp(new URL(url).hostname);
    } catch {
      return false;
    }
    return host === seen || (sameNetwork && isLocalNetwork(host));
  });
}
