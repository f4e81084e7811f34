import type { AgentId } from '@agentlink/core';
import type { PeerRecord, SignedRecord } from '@agentlink/nat';
import { clientOfIp } from './ip-limits.js';

export interface StoredRecord {
  record: PeerRecord;
  signed: SignedRecord;
  /**
   * The IP that registered it: where punches answered for it aim (`seenAt`), and, as its client (`clientOfIp`: an
   * IPv6 address's /64), what `maxRegistrationsPerIp` counts.
   */
  ip: string;
  /**
   * The rendezvous instance that holds the agent's control channel (its AgentId): where punch requests and
   * relays for this agent go when several instances share a store. Undefined in a store of one instance.
   */
  instance?: AgentId;
}

/** The limits a registration is checked against, atomically with storing it. */
export interface RegistryLimits {
  maxRegistrations: number;
  /** Live registrations per client: an IPv4 address or an IPv6 /64 (`clientOfIp`), like every per-IP limit. */
  maxRegistrationsPerIp: number;
}

/**
 * What `put` did: stored (a new agent, or a heartbeat of a known one), or refused because the sequence number
 * is not newer than the stored record's (a replay), the registry is full, or the IP holds too many agents.
 */
export type PutOutcome =
  | { stored: true; isNew: boolean }
  | { stored: false; reason: 'replayed'; storedSeq: number }
  | { stored: false; reason: 'full' | 'per-ip' };

/**
 * Where registrations live: in memory by default (`MemoryRegistry`), or in Valkey/Redis shared by several
 * instances (`RedisRegistry`). Records are verified before `put`; `put` enforces the sequence number and the
 * limits in one atomic step, so two instances cannot both accept a replay; `get` never returns an expired record.
 * Every store passes the same conformance tests (test/store-conformance.ts).
 */
export interface RegistryStore {
  get(id: AgentId): Promise<StoredRecord | undefined>;
  put(entry: StoredRecord, limits: RegistryLimits, now?: number): Promise<PutOutcome>;
  /** Live records (not expired at `now`). */
  size(now?: number): Promise<number>;
  /** Live registrations held for `ip`'s client (its /64 for IPv6). */
  countByIp(ip: string, now?: number): Promise<number>;
  /** Drops records expired at `now`; returns how many. */
  sweep(now: number): Promise<number>;
  close(): Promise<void>;
}

export class MemoryRegistry implements RegistryStore {
  private readonly records = new Map<AgentId, StoredRecord>();
  /** Live registrations per client (`clientOfIp`). */
  private readonly perIp = new Map<string, number>();

  async get(id: AgentId): Promise<StoredRecord | undefined> {
    return this.live(id, Date.now());
  }

  async put(entry: StoredRecord, limits: RegistryLimits, now = Date.now()): Promise<PutOutcome> {
    // One thread: the check and the write below cannot interleave with another put.
    const previous = this.live(entry.record.agentId, now);
    if (previous && entry.record.seq <= previous.record.seq) return { stored: false, reason: 'replayed', storedSeq: previous.record.seq };
    if (!previous) {
      if (this.records.size >= limits.maxRegistrations) this.sweepNow(now);
      if (this.records.size >= limits.maxRegistrations) return { stored: false, reason: 'full' };
      if ((this.perIp.get(clientOfIp(entry.ip)) ?? 0) >= limits.maxRegistrationsPerIp) return { stored: false, reason: 'per-ip' };
    } else this.uncount(previous.ip);
    this.records.set(entry.record.agentId, entry);
    const client = clientOfIp(entry.ip);
    this.perIp.set(client, (this.perIp.get(client) ?? 0) + 1);
    return { stored: true, isNew: previous === undefined };
  }

  async size(): Promise<number> {
    return this.records.size;
  }

  async countByIp(ip: string): Promise<number> {
    return this.perIp.get(clientOfIp(ip)) ?? 0;
  }

  async sweep(now: number): Promise<number> {
    return this.sweepNow(now);
  }

  async close(): Promise<void> {
    this.records.clear();
    this.perIp.clear();
  }

  private live(id: AgentId, now: number): StoredRecord | undefined {
    const entry = this.records.get(id);
    if (entry && entry.record.expiresAt <= now) {
      this.delete(id);
      return undefined;
    }
    return entry;
  }

  private sweepNow(now: number): number {
    let dropped = 0;
    for (const [id, entry] of this.records) {
      if (entry.record.expiresAt <= now) {
        this.delete(id);
        dropped++;
      }
    }
    return dropped;
  }

  private delete(id: AgentId): void {
    const entry = this.records.get(id);
    if (!entry) return;
    this.records.delete(id);
    this.uncount(entry.ip);
  }

  private uncount(ip: string): void {
    const client = clientOfIp(ip);
    const n = (this.perIp.get(client) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(client);
    else this.perIp.set(client, n);
  }
}
