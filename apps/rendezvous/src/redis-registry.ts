import { isAgentId, type AgentId } from '@agentlink/core';
import { verifyRecord } from '@agentlink/nat';
import { clientOfIp } from './ip-limits.js';
import type { PutOutcome, RegistryLimits, RegistryStore, StoredRecord } from './registry.js';
import type { RedisConnection } from './redis-connection.js';

/**
 * Stores a registration atomically: the sequence number must grow, and a new agent must fit the limits.
 * KEYS: record hash, zset of all live agents, zset of the client's agents (its IP, or an IPv6 address's /64:
 * `clientOfIp`). ARGV: seq, expiresAt, now, maxRegistrations, maxRegistrationsPerIp, agentId, ip, record bytes,
 * signature, instance, client-key prefix, client. The hash keeps the IP (punches aim there) and the client it was
 * counted as (`grp`; a record written before 2026-11-24 has none and was counted under its IP).
 * The record's key expires with the record (PEXPIREAT); the zsets are scored by expiry and trimmed as they are read.
 */
const PUT_SCRIPT = `
local current = redis.call('HMGET', KEYS[1], 'seq', 'grp', 'ip')
local counted = current[2] or current[3]
if current[1] then
  if tonumber(current[1]) >= tonumber(ARGV[1]) then return {'replayed', current[1]} end
else
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return {'full'} end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return {'per-ip'} end
end
if counted and counted ~= ARGV[12] then redis.call('ZREM', ARGV[11] .. counted, ARGV[6]) end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'ip', ARGV[7], 'grp', ARGV[12], 'rec', ARGV[8], 'sig', ARGV[9], 'inst', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[6])
if redis.call('PEXPIRETIME', KEYS[3]) < tonumber(ARGV[2]) then redis.call('PEXPIREAT', KEYS[3], ARGV[2]) end
if current[1] then return {'heartbeat'} end
return {'new'}
`;

/** Counts the IP's live agents (trimming the expired first). KEYS: the IP's zset. ARGV: now. */
const COUNT_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZCARD', KEYS[1])
`;

export interface RedisRegistryOptions {
  /** Prefix of every key (default `agentlink:`): several deployments can share one server. */
  prefix?: string;
  /** Told about a stored record that fails verification (someone wrote to the store): it is never served. */
  onForged?: (id: AgentId, error: Error) => void;
}

/**
 * The registry in Valkey/Redis, shared by every rendezvous instance that uses the same server and prefix. A record
 * is the signed bytes as the agent sent them, verified again on every read (the store is not trusted more than
 * the wire). Needs one server (with replicas or Sentinel if wanted), not Redis Cluster: the put script touches
 * keys of several slots.
 */
export class RedisRegistry implements RegistryStore {
  private readonly prefix: string;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: RedisRegistryOptions = {},
  ) {
    this.prefix = options.prefix ?? 'agentlink:';
  }

  async get(id: AgentId): Promise<StoredRecord | undefined> {
    if (!isAgentId(id)) return undefined;
    const fields = await this.redis.command<Buffer[] | null>(['HMGET', this.recordKey(id), 'rec', 'sig', 'ip', 'inst']);
    const [rec, sig, ip, inst] = fields ?? [];
    if (!rec || !sig || !ip) return undefined;
    const signed = { record: new Uint8Array(rec), signature: new Uint8Array(sig) };
    try {
      const record = verifyRecord(signed);
      if (record.agentId !== id) throw new Error(`the record under ${id} names ${record.agentId}`);
      const instance = inst && inst.length > 0 ? (inst.toString() as AgentId) : undefined;
      return { record, signed, ip: ip.toString(), ...(instance ? { instance } : {}) };
    } catch (error) {
      // Expired between the server's clock and ours, or written by someone without the agent's key: not served.
      if ((error as { code?: string }).code !== 'DEADLINE_EXCEEDED') this.options.onForged?.(id, error as Error);
      return undefined;
    }
  }

  async put(entry: StoredRecord, limits: RegistryLimits, now = Date.now()): Promise<PutOutcome> {
    const { record, signed, ip } = entry;
    const client = clientOfIp(ip);
    const reply = await this.redis.script<Buffer[]>(
      PUT_SCRIPT,
      [this.recordKey(record.agentId), this.allKey(), this.clientKey(client)],
      [
        String(record.seq),
        String(record.expiresAt),
        String(now),
        String(limits.maxRegistrations),
        String(limits.maxRegistrationsPerIp),
        record.agentId,
        ip,
        Buffer.from(signed.record),
        Buffer.from(signed.signature),
        entry.instance ?? '',
        `${this.prefix}ip:`,
        client,
      ],
    );
    const outcome = reply[0]!.toString();
    if (outcome === 'new' || outcome === 'heartbeat') return { stored: true, isNew: outcome === 'new' };
    if (outcome === 'replayed') return { stored: false, reason: 'replayed', storedSeq: Number(reply[1]!.toString()) };
    return { stored: false, reason: outcome as 'full' | 'per-ip' };
  }

  async size(now = Date.now()): Promise<number> {
    return Number(await this.redis.command<number>(['ZCOUNT', this.allKey(), `(${now}`, '+inf']));
  }

  async countByIp(ip: string, now = Date.now()): Promise<number> {
    return Number(await this.redis.script<number>(COUNT_SCRIPT, [this.clientKey(clientOfIp(ip))], [String(now)]));
  }

  /** Redis expires the records itself; this trims the index of live agents (per-IP indexes trim as they are read). */
  async sweep(now: number): Promise<number> {
    return Number(await this.redis.command<number>(['ZREMRANGEBYSCORE', this.allKey(), '-inf', String(now)]));
  }

  async close(): Promise<void> {
    // The connection belongs to whoever opened it (the rendezvous shares it with the cluster bus).
  }

  private recordKey(id: AgentId): string {
    return `${this.prefix}rec:${id}`;
  }

  private allKey(): string {
    return `${this.prefix}agents`;
  }

  /** The zset of a client's live agents (`ip:` and the client, an IPv4 address's zset keeps its old name). */
  private clientKey(client: string): string {
    return `${this.prefix}ip:${client}`;
  }
}
