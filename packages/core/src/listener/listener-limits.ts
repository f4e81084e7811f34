import { AgentError } from '../errors.js';
import { TokenBucket } from '../middleware/token-bucket.js';
import { addressGroup } from './address-group.js';

/**
 * What one listener lets strangers hold before any of them proved a key. Every channel's listener takes these
 * options with the same meaning and defaults (see docs/security.md); all are checked before TLS work.
 */
export interface ListenerLimits {
  /** Connections (in handshake or open) a listener holds at once (default 4,096); more are closed at once. */
  maxConnections?: number;
  /** Connections from one IP at once (default 1,024). */
  maxConnectionsPerIp?: number;
  /** New connections one IP may open per second, with a burst of 5 s worth (default 200/s). */
  newConnectionsPerIpPerSecond?: number;
  /** Upper bound of one TLS (or QUIC) handshake before the socket is closed (default 5 s). */
  handshakeTimeoutMs?: number;
  /**
   * IPv6 peers are counted per network of this prefix length, not per address (default 64, 1–128; 128 counts
   * each address): one host usually holds a whole /64, so per address the per-IP limits would bind nobody.
   * Raise it when many of your own agents share one /64 (e.g. one cloud subnet) and reach one listener.
   */
  ipv6PrefixLength?: number;
}

/** An admitted connection's place in a {@link ConnectionAdmission}. */
export interface AdmissionTicket {
  /** Gives the place back when the connection ends. */
  release(): void;
}

/** The limits a listener applies when its options give none. */
export const DEFAULT_LISTENER_LIMITS: Required<ListenerLimits> = {
  maxConnections: 4096,
  maxConnectionsPerIp: 1024,
  newConnectionsPerIpPerSecond: 200,
  handshakeTimeoutMs: 5000,
  ipv6PrefixLength: 64,
};

/** IPs tracked for the per-IP rate at most; the oldest are forgotten first (their buckets start full again). */
const MAX_TRACKED_IPS = 100_000;

/** Validates listener limits (each a positive integer when given) and fills in the defaults. */
export function resolveListenerLimits(limits: ListenerLimits = {}): Required<ListenerLimits> {
  const resolved = { ...DEFAULT_LISTENER_LIMITS };
  for (const key of Object.keys(DEFAULT_LISTENER_LIMITS) as (keyof ListenerLimits)[]) {
    const value = limits[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new AgentError('INVALID_ARGUMENT', `listener option ${key} must be a positive integer, got ${String(value)}`);
    }
    if (key === 'ipv6PrefixLength' && value > 128) {
      throw new AgentError('INVALID_ARGUMENT', `listener option ipv6PrefixLength must be at most 128, got ${value}`);
    }
    resolved[key] = value;
  }
  return resolved;
}

/** Why `admit` said no: the `reason` of the refusal it reports. */
export type AdmissionRefusal = 'max-connections' | 'max-connections-per-ip' | 'ip-rate';

/**
 * Counts a listener's connections and each IP's arrivals (an IPv6 peer's by its network, `ipv6PrefixLength`). A
 * transport asks `admit(ip)` for every new connection before any TLS work and calls the returned `release` once
 * that connection is gone.
 */
export class ConnectionAdmission {
  private readonly limits: Required<ListenerLimits>;
  private readonly perIp = new Map<string, number>();
  private readonly buckets = new Map<string, TokenBucket>();
  private open = 0;

  constructor(limits: ListenerLimits = {}) {
    this.limits = resolveListenerLimits(limits);
  }

  get handshakeTimeoutMs(): number {
    return this.limits.handshakeTimeoutMs;
  }

  /** Connections held now. */
  get connections(): number {
    return this.open;
  }

  /** Admits a connection from `ip` (returns its release function) or says why not. */
  admit(address: string): AdmissionTicket | AdmissionRefusal {
    if (this.open >= this.limits.maxConnections) return 'max-connections';
    const ip = addressGroup(address, this.limits.ipv6PrefixLength);
    const fromIp = this.perIp.get(ip) ?? 0;
    if (fromIp >= this.limits.maxConnectionsPerIp) return 'max-connections-per-ip';
    if (!this.takeToken(ip)) return 'ip-rate';
    this.open++;
    this.perIp.set(ip, fromIp + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.open--;
        const left = (this.perIp.get(ip) ?? 1) - 1;
        if (left === 0) this.perIp.delete(ip);
        else this.perIp.set(ip, left);
      },
    };
  }

  private takeToken(ip: string): boolean {
    let bucket = this.buckets.get(ip);
    if (!bucket) {
      if (this.buckets.size >= MAX_TRACKED_IPS) this.buckets.delete(this.buckets.keys().next().value!);
      const rate = this.limits.newConnectionsPerIpPerSecond;
      this.buckets.set(ip, (bucket = new TokenBucket(rate, rate * 5)));
    }
    if (bucket.delayIfTaken() > 0) return false;
    bucket.take();
    return true;
  }
}
