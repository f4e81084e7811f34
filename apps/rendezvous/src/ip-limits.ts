import { TokenBucket } from '@agentlink/core';

/** IPs tracked at most; the oldest are forgotten first (their buckets start full again). */
const MAX_TRACKED_IPS = 100_000;

/** A token bucket per client IP: a flood from one address is refused while others are served. */
export class PerIpRate {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(private readonly ratePerSecond: number) {}

  /** Takes one token for `ip`; false when its bucket is empty. */
  allow(ip: string): boolean {
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

/** The IP part of `ip:port` or `[v6]:port`. */
export function ipOf(remoteAddress: string): string {
  const v6 = /^\[(.*)\]:\d+$/.exec(remoteAddress);
  if (v6) return v6[1]!;
  const colon = remoteAddress.lastIndexOf(':');
  return colon > 0 && remoteAddress.indexOf(':') === colon ? remoteAddress.slice(0, colon) : remoteAddress;
}
