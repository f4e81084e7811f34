import { isIP } from 'node:net';
import { TokenBucket } from '@agentlink/core';
import { addressGroup, DEFAULT_LISTENER_LIMITS } from '@agentlink/core/transport';

/** IPs tracked at most; the oldest are forgotten first (their buckets start full again). */
const MAX_TRACKED_IPS = 100_000;

/**
 * A token bucket per client IP (an IPv6 client's per /64, see `clientOf`): a flood from one address is refused
 * while others are served.
 */
export class PerIpRate {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(private readonly ratePerSecond: number) {}

  /** Takes one token for `address`'s client; false when its bucket is empty. */
  allow(address: string): boolean {
    const ip = clientOfIp(address);
    let bucket = this.buckets.get(ip);
    if (!bucket) {
      if (this.buckets.size >= MAX_TRACKED_IPS) this.buckets.delete(this.buckets.keys().next().value!);
      this.buckets.set(ip, (bucket = new TokenBucket(this.ratePerSecond, this.ratePerSecond * 2)));
    }
    if (bucket.delayIfTaken() > 0) return false;
    bucket.take();
    return true;
  }
}

/**
 * The IP part of `ip:port` or `[v6]:port`. An IPv6 ip may still come without brackets (ws and HTTP/2 wrote a
 * channel's address as `${socket.remoteAddress}:${socket.remotePort}` until 2026-11-24, and a transport a user
 * plugs in may): the port is then what follows the last colon.
 */
export function ipOf(remoteAddress: string): string {
  const v6 = /^\[(.*)\]:\d+$/.exec(remoteAddress);
  if (v6) return v6[1]!;
  const colon = remoteAddress.lastIndexOf(':');
  const ip = remoteAddress.slice(0, colon);
  return colon > 0 && /^\d+$/.test(remoteAddress.slice(colon + 1)) && isIP(ip) !== 0 ? ip : remoteAddress;
}

/**
 * Who a client is for the per-IP rates and relay counts: its IP, or its IPv6 network (/64, as core's listener
 * counts connections), since one host holding a /64 could otherwise be 2^64 clients.
 */
export function clientOf(remoteAddress: string): string {
  return clientOfIp(ipOf(remoteAddress));
}

/** `clientOf` for a bare IP (no port): an IPv4 address, or an IPv6 address's /64 (IPv4-mapped ones as IPv4). */
export function clientOfIp(ip: string): string {
  return addressGroup(ip, DEFAULT_LISTENER_LIMITS.ipv6PrefixLength);
}
