import { AgentError } from '../errors.js';
import { TokenBucket } from '../middleware/token-bucket.js';
import { addressGroup } from './address-group.js';
import { ConnectionGroups, MIN_IDLE_MS_BEFORE_EVICTION, type ConnectionActivity, type HeldConnection } from './connection-groups.js';
import { MAX_TIMER_MS } from '../util/options.js';

/**
 * What one listener lets strangers hold before any of them proved a key. Every channel's listener takes these
 * options with the same meaning and defaults (see docs/security.md); all are checked before TLS work.
 */
export interface ListenerLimits {
  /**
   * Connections (in handshake or open) a listener holds at once (default 4,096); more are closed at once, unless
   * the newcomer's address group holds at least two fewer than the group holding the most: then that group's
   * connection idle the longest (1 s at least) is closed with RESOURCE_EXHAUSTED to make room (docs/security.md).
   */
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

/**
 * An admitted connection's place in a {@link ConnectionAdmission}. Its channel reports its activity (`busy` when
 * its first stream opens, `idle` when its last one ends): only an idle connection may be evicted.
 */
export interface AdmissionTicket extends ConnectionActivity {
  /** Gives the place back when the connection ends. */
  release(): void;
  /**
   * What an eviction does to this connection: close it, telling the peer why. The place is given back at once
   * (the closing connection no longer counts). Without one, an eviction only gives the place back.
   */
  onEvict(close: () => void): void;
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
    // A node timer: above its longest delay it fires after 1 ms, and every handshake would be cut at once.
    if (key === 'handshakeTimeoutMs' && value > MAX_TIMER_MS) {
      throw new AgentError('INVALID_ARGUMENT', `listener option handshakeTimeoutMs must be at most ${MAX_TIMER_MS}, got ${value}`);
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
 *
 * A full listener makes room for a newcomer whose group holds at least two fewer connections than the group
 * holding the most: it evicts that group's connection idle the longest (no stream open for at least
 * MIN_IDLE_MS_BEFORE_EVICTION), so a few addresses cannot hold every place (docs/security.md, "Eviction"). The
 * newcomer pays for it with its own per-IP rate: no eviction without an admission.
 */
export class ConnectionAdmission {
  private readonly limits: Required<ListenerLimits>;
  private readonly groups = new ConnectionGroups();
  private readonly buckets = new Map<string, TokenBucket>();
  private open = 0;
  /** Connections evicted so far. */
  evictions = 0;

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
    const ip = addressGroup(address, this.limits.ipv6PrefixLength);
    const now = performance.now();
    let victim: HeldConnection | undefined;
    if (this.open >= this.limits.maxConnections) {
      victim = this.groups.victimFor(ip, now, MIN_IDLE_MS_BEFORE_EVICTION);
      if (!victim) return 'max-connections';
    }
    if (this.groups.count(ip) >= this.limits.maxConnectionsPerIp) return 'max-connections-per-ip';
    if (!this.takeToken(ip)) return 'ip-rate';
    if (victim) this.evict(victim);
    this.open++;
    return new Ticket(this, this.groups.add(ip, now));
  }

  /**
   * Gives a connection's place back (once); its ticket's `release`.
   * @internal
   */
  giveBack(held: HeldConnection): void {
    if (held.released) return;
    this.groups.remove(held);
    this.open--;
  }

  /** @internal */
  markBusy(held: HeldConnection): void {
    this.groups.markBusy(held);
  }

  /** @internal */
  markIdle(held: HeldConnection): void {
    this.groups.markIdle(held, performance.now());
  }

  private evict(victim: HeldConnection): void {
    this.giveBack(victim);
    this.evictions++;
    victim.close?.();
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

/** An admitted connection's ticket: its place, its activity and its eviction. */
class Ticket implements AdmissionTicket {
  constructor(
    private readonly admission: ConnectionAdmission,
    private readonly held: HeldConnection,
  ) {}

  release(): void {
    this.admission.giveBack(this.held);
  }

  busy(): void {
    this.admission.markBusy(this.held);
  }

  idle(): void {
    this.admission.markIdle(this.held);
  }

  onEvict(close: () => void): void {
    this.held.close = close;
  }
}
