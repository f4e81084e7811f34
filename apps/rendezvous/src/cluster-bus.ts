import { randomUUID } from 'node:crypto';
import { AgentError, isAgentId, isErrorCode, toAgentError, type AgentId, type ErrorCode } from '@agentlink/core';
import type { RedisConnection } from './redis-connection.js';

/** What one instance asks another (the one holding an agent's control channel) to do. */
export interface ClusterRequest {
  kind: 'punch';
  /** The agent to tell. */
  target: AgentId;
  /** The agent punching towards it, and its signed record (bytes as base64). */
  peer: AgentId;
  record: { record: string; signature: string };
  /** The IP the asking instance saw `peer` register from (the target dials only there, or its own LAN). */
  seenAt?: string;
  /**
   * Who asked (`clientOf` its address: an IP, or an IPv6 /64): the instance holding the target counts the asker's
   * share of the target's punch rate, so that the share is one across the cluster (absent from instances of before).
   */
  client?: string;
}

interface Envelope {
  t: 'req' | 'res';
  id: string;
  from?: AgentId;
  body?: ClusterRequest;
  error?: { code: ErrorCode; message: string };
}

/** Messages between instances are small; anything larger on the bus is not ours. */
const MAX_MESSAGE = 16 * 1024;
/** An instance that has not announced itself for this long is gone. */
const INSTANCE_TTL_MS = 6000;
const ANNOUNCE_MS = 2000;

/**
 * The instances of one rendezvous cluster, through Valkey/Redis: each announces itself (id and address, with an
 * expiry), and listens on its own pub/sub channel for requests from the others: when agent A on instance 1 asks to
 * punch towards agent B whose control channel is held by instance 2, instance 1 publishes the request on
 * instance 2's channel and waits for its answer.
 */
export class ClusterBus {
  private readonly pending = new Map<string, { resolve: () => void; reject: (e: AgentError) => void; timer: NodeJS.Timeout }>();
  private subscriber: RedisConnection['raw'] | undefined;
  private announcer: NodeJS.Timeout | undefined;
  requestsSent = 0;
  requestsServed = 0;

  constructor(
    private readonly redis: RedisConnection,
    private readonly self: { id: AgentId; address: string },
    private readonly serve: (request: ClusterRequest) => Promise<void>,
    private readonly prefix = 'agentlink:',
  ) {}

  async start(): Promise<void> {
    this.subscriber = this.redis.raw.duplicate();
    this.subscriber.on('error', () => undefined); // reconnects by itself; the main connection's state is what /healthz reports
    await this.subscriber.connect();
    await this.subscriber.subscribe(this.channel(this.self.id), (message: Buffer | string) => void this.onMessage(message.toString()));
    await this.announce().catch(() => undefined);
    this.announcer = setInterval(() => void this.announce().catch(() => undefined), ANNOUNCE_MS).unref();
  }

  /** Live instances' addresses (this one included), by AgentId. */
  async instances(now = Date.now()): Promise<Map<AgentId, string>> {
    const ids = (await this.redis.command<Buffer[]>(['ZRANGEBYSCORE', this.key('instances'), `(${now}`, '+inf'])).map(String);
    if (ids.length === 0) return new Map();
    const addresses = await this.redis.command<Array<Buffer | null>>(['HMGET', this.key('instance-addresses'), ...ids]);
    const live = new Map<AgentId, string>();
    ids.forEach((id, i) => {
      const address = addresses[i];
      if (address && isAgentId(id)) live.set(id, address.toString());
    });
    return live;
  }

  /** Asks `instance` to carry out `body`; resolves once it has, rejects with its error or UNAVAILABLE. */
  async request(instance: AgentId, body: ClusterRequest, timeoutMs = 5000): Promise<void> {
    const id = randomUUID();
    const answered = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new AgentError('UNAVAILABLE', `rendezvous instance ${instance} did not answer in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
    });
    this.requestsSent++;
    const receivers = await this.redis
      .command<number>(['PUBLISH', this.channel(instance), JSON.stringify({ t: 'req', id, from: this.self.id, body } satisfies Envelope)])
      .catch((error: unknown) => {
        this.settle(id, toAgentError(error));
        return 1;
      });
    if (Number(receivers) === 0) this.settle(id, new AgentError('UNAVAILABLE', `rendezvous instance ${instance} is gone; the agent re-registers elsewhere at its next heartbeat`));
    return answered;
  }

  async close(): Promise<void> {
    clearInterval(this.announcer);
    for (const id of [...this.pending.keys()]) this.settle(id, new AgentError('CLOSED', 'rendezvous closing'));
    await this.redis.command(['ZREM', this.key('instances'), this.self.id]).catch(() => undefined);
    if (this.subscriber?.isOpen) await this.subscriber.close().catch(() => undefined);
    else this.subscriber?.destroy();
  }

  private async announce(): Promise<void> {
    await this.redis.command(['HSET', this.key('instance-addresses'), this.self.id, this.self.address]);
    await this.redis.command(['ZADD', this.key('instances'), String(Date.now() + INSTANCE_TTL_MS), this.self.id]);
  }

  private async onMessage(text: string): Promise<void> {
    if (text.length > MAX_MESSAGE) return;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(text) as Envelope;
    } catch {
      return;
    }
    if (envelope.t === 'res') {
      const { error } = envelope;
      this.settle(envelope.id, error ? new AgentError(isErrorCode(error.code) ? error.code : 'UNKNOWN', String(error.message).slice(0, 512)) : undefined);
      return;
    }
    if (envelope.t !== 'req' || typeof envelope.id !== 'string' || !envelope.body || !isAgentId(envelope.from ?? '')) return;
    this.requestsServed++;
    let error: Envelope['error'];
    try {
      await this.serve(envelope.body);
    } catch (e) {
      const agentError = toAgentError(e);
      error = { code: agentError.code, message: agentError.message };
    }
    const reply: Envelope = { t: 'res', id: envelope.id, ...(error ? { error } : {}) };
    await this.redis.command(['PUBLISH', this.channel(envelope.from!), JSON.stringify(reply)]).catch(() => undefined);
  }

  private settle(id: string, error: AgentError | undefined): void {
    const waiting = this.pending.get(id);
    if (!waiting) return;
    this.pending.delete(id);
    clearTimeout(waiting.timer);
    if (error) waiting.reject(error);
    else waiting.resolve();
  }

  private channel(instance: AgentId): string {
    return this.key(`instance:${instance}`);
  }

  private key(name: string): string {
    return `${this.prefix}${name}`;
  }
}
