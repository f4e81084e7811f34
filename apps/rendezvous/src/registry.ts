import type { AgentId } from '@agentlink/core';
import type { PeerRecord, SignedRecord } from '@agentlink/nat';

export interface StoredRecord {
  record: PeerRecord;
  signed: SignedRecord;
  /** The IP that registered it (abuse limits). */
  ip: string;
}

/**
 * Where registrations live. In memory by default; the interface is what a shared store (e.g. Redis, for
 * several rendezvous instances) implements. Validation happens before `put`: stores only store.
 */
export interface RegistryStore {
  get(id: AgentId): StoredRecord | undefined;
  put(entry: StoredRecord): void;
  delete(id: AgentId): void;
  readonly size: number;
  /** Registrations held for `ip`. */
  countByIp(ip: string): number;
  /** Drops records expired at `now`; returns how many. */
  sweep(now: number): number;
}

export class MemoryRegistry implements RegistryStore {
  private readonly records = new Map<AgentId, StoredRecord>();
  private readonly perIp = new Map<string, number>();

  get size(): number {
    return this.records.size;
  }

  get(id: AgentId): StoredRecord | undefined {
    const entry = this.records.get(id);
    if (entry && entry.record.expiresAt <= Date.now()) {
      this.delete(id);
      return undefined;
    }
    return entry;
  }

  put(entry: StoredRecord): void {
    const previous = this.records.get(entry.record.agentId);
    if (previous) this.uncount(previous.ip);
    this.records.set(entry.record.agentId, entry);
    this.perIp.set(entry.ip, (this.perIp.get(entry.ip) ?? 0) + 1);
  }

  delete(id: AgentId): void {
    const entry = this.records.get(id);
    if (!entry) return;
    this.records.delete(id);
    this.uncount(entry.ip);
  }

  countByIp(ip: string): number {
    return this.perIp.get(ip) ?? 0;
  }

  sweep(now: number): number {
    let dropped = 0;
    for (const [id, entry] of this.records) {
      if (entry.record.expiresAt <= now) {
        this.delete(id);
        dropped++;
      }
    }
    return dropped;
  }

  private uncount(ip: string): void {
    const n = (this.perIp.get(ip) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(ip);
    else this.perIp.set(ip, n);
  }
}
