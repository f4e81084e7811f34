import { createServer, type Server } from 'node:http';
import { AgentError, createAgent, isAgentId, loadOrCreateIdentity, type Agent, type AgentId, type CallContext, type Identity } from '@agentlink/core';
import type { ChannelStream } from '@agentlink/core/transport';
import { verifyRecord, type SignedRecord } from '@agentlink/nat';
import { webSocket } from '@agentlink/ws';
import { DEFAULT_CONFIG, boundHint, checkConfig, followRegistrations, listenerLimits, type RendezvousConfig } from './config.js';
import { PerIpRate, clientOf, clientOfIp, ipOf } from './ip-limits.js';
import { silentLogger, type Logger } from './log.js';
import { ClusterBus, type ClusterRequest } from './cluster-bus.js';
import { listenError } from './listen-error.js';
import { connectRedis, type RedisConnection } from './redis-connection.js';
import { RedisRegistry } from './redis-registry.js';
import { MemoryRegistry, type RegistryStore, type StoredRecord } from './registry.js';
import { RendezvousMetrics } from './metrics.js';
import { RefusalLog } from './refusal-log.js';
import { Relays, type RelaySlot } from './relay.js';
import { startStunServer, type StunServer } from './stun-server.js';

export interface RendezvousOptions extends Partial<RendezvousConfig> {
  identity?: Identity;
  registry?: RegistryStore;
  log?: Logger;
  /** Sees every relayed chunk (tests prove it is ciphertext). */
  relayTap?: (chunk: Uint8Array) => void;
}

export interface Rendezvous {
  agent: Agent;
  /** `<AgentId>@wss://host:port/agentlink`: what agents pass to `reach({ rendezvous })`. */
  address: string;
  stunPorts: [number, number];
  httpPort: number | undefined;
  registry: RegistryStore;
  metrics: RendezvousMetrics;
  /** The configuration it runs with (defaults filled in). */
  config: RendezvousConfig;
  /** What /healthz answers: the store's state (`memory`, or Redis `up`/`down`) and this instance's load. */
  health(): Promise<RendezvousHealth>;
  close(): Promise<void>;
}

export interface RendezvousHealth {
  ok: boolean;
  store: 'memory' | 'redis';
  /** Redis only: whether this instance reaches it now. */
  redis?: 'up' | 'down';
  /** Live records in the store (all instances' when shared); absent while the store is unreachable. */
  registered?: number;
  relays: number;
  /** Redis only: live instances of the cluster. */
  instances?: number;
}

const SWEEP_MS = 1000;
/** How often the listener's refusals (before TLS) are logged, as counts of the interval. */
const LISTENER_REFUSALS_LOG_MS = 10_000;
/** Control messages are small: records, lookups, punch requests. */
const MAX_FRAME = 64 * 1024;

/**
 * Starts the rendezvous: an agentlink agent on a wss control port (agents prove their key by mutual TLS), two
 * STUN ports, and an HTTP port for /healthz and /metrics. Methods: rdv.info, rdv.register, rdv.lookup,
 * rdv.punch, and the rdv.relay tunnel.
 */
export async function startRendezvous(options: RendezvousOptions = {}): Promise<Rendezvous> {
  const config: RendezvousConfig = followRegistrations(definedOnly(options), DEFAULT_CONFIG);
  checkConfig(config);
  const log = options.log ?? silentLogger;
  const identity = options.identity ?? (config.keyFile ? await loadOrCreateIdentity(config.keyFile) : undefined);
  const metrics = new RendezvousMetrics();
  const redis: RedisConnection | undefined =
    options.registry === undefined && config.redisUrl !== undefined
      ? await connectRedis(config.redisUrl, (error) => log('warn', 'redis', { error: error.message }))
      : undefined;
  const registry: RegistryStore =
    options.registry ??
    (redis
      ? new RedisRegistry(redis, { prefix: config.redisPrefix, onForged: (agent, error) => (metrics.rejected('stored-forged'), log('warn', 'forged record in the store', { agent, error: error.message })) })
      : new MemoryRegistry());
  const limits = { maxRegistrations: config.maxRegistrations, maxRegistrationsPerIp: config.maxRegistrationsPerIp };
  const relays = new Relays(config, options.relayTap);
  const registrationRate = new PerIpRate(config.registrationsPerSecondPerIp);
  const requestRate = new PerIpRate(config.requestsPerSecondPerIp);
  // Keyed by the target's AgentId rather than an IP: a token bucket per key all the same.
  const punchRate = new PerIpRate(config.punchesPerSecondPerTarget);
  // Keyed by target and asking client (`<AgentId> <client>`): each address's share of one target's rate.
  const punchShare = new PerIpRate(config.punchesPerSecondPerTargetPerIp);

  let agent: Agent;
  try {
    agent = await createAgent({
    identity,
    // Core's listener limits, checked before TLS: connections in all and per IP, new ones per IP per second (refusals
    // are counted in agentlink_refusals_total), and the handshake bound.
    channels: [webSocket({ port: config.port, host: config.host, limits: listenerLimits(config) })],
    maxFrameSize: MAX_FRAME,
    interceptors: [metrics.calls.interceptor],
    inboundInterceptors: [metrics.calls.inboundInterceptor],
    // The connection gate: with an allow list, any other agent's channel is refused with PERMISSION_DENIED.
    allowPeers: config.allowAgents,
    });
  } catch (error) {
    await redis?.close();
    throw listenError('the wss port (--port)', config.host, config.port, error);
  }
  const stunRate = new PerIpRate(config.stunRequestsPerSecondPerIp);
  const started = await Promise.allSettled(
    config.stunPorts.map((port) =>
      startStunServer({ host: config.host, port, rate: stunRate, onDatagram: (outcome, received, sent) => metrics.stunDatagram(outcome, received, sent) }),
    ),
  );
  const failed = started.findIndex((s) => s.status === 'rejected');
  if (failed !== -1) {
    // A STUN port that cannot be bound (e.g. in use) stops the start without leaving the other ports open.
    await Promise.all(started.map((s) => (s.status === 'fulfilled' ? s.value.close() : undefined)));
    await agent.close();
    await redis?.close();
    throw listenError('the STUN port (--stun-ports)', config.host, config.stunPorts[failed]!, (started[failed] as PromiseRejectedResult).reason);
  }
  const stun = started.map((s) => (s as PromiseFulfilledResult<StunServer>).value);

  const refuse = (reason: string, error: AgentError): never => {
    metrics.rejected(reason);
    throw error;
  };
  const refusalLog = new RefusalLog(log);
  /**
   * A refusal by one of the bounds (`bound`, a setting): the agent is told which, its value and how to raise it, and
   * the operator reads it in the log (a line per bound and client a minute at most).
   */
  const refuseBy = (bound: keyof RendezvousConfig, reason: string, what: string, client: string): never => {
    const error = new AgentError('RESOURCE_EXHAUSTED', `${what} (${boundHint(bound, config[bound] as number)})`);
    refusalLog.refused(bound, client, error.message);
    return refuse(reason, error);
  };
  const limitRequests = (ctx: CallContext): void => {
    if (!requestRate.allow(ipOf(ctx.remoteAddress))) refuseBy('requestsPerSecondPerIp', 'rate', 'too many requests from your address', clientOf(ctx.remoteAddress));
  };
  /**
   * The AgentId a request names in `field` (rdv.lookup's `agentId`, the others' `target`). Until 2026-11-24 a body
   * of another shape was a TypeError (HANDLER_ERROR, quoting the engine's message), an object as the id failed
   * converting to a string, and any string up to the frame size went to the store as a key.
   */
  const agentIdIn = (body: unknown, field: 'agentId' | 'target'): AgentId => {
    const id = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[field] : undefined;
    if (!isAgentId(id)) refuse('invalid', new AgentError('INVALID_ARGUMENT', `the request's ${field} must be an AgentId`));
    return id as AgentId;
  };
  const lookup = async (id: AgentId): Promise<StoredRecord> => {
    const entry = await registry.get(id);
    if (!entry) throw new AgentError('NOT_FOUND', `${id} is not registered`);
    return entry;
  };
  /** The instance holding `entry`'s control channel, when it is another one (several instances share the store). */
  const elsewhere = (entry: StoredRecord): AgentId | undefined => (bus && entry.instance && entry.instance !== agent.id ? entry.instance : undefined);
  /**
   * A punch request towards `target` from `client` (the asker's IP or IPv6 /64; unknown when an instance of before
   * relayed it) takes the asker's share first, then the target's rate: a refused share takes nothing from the rate,
   * which others then still get. Checked by the instance holding the target's control channel, the one place every
   * punch towards it passes: counted at the instance asked, a cluster of N gave the target N times its rate, and
   * one address N times its share.
   */
  const limitPunch = (target: AgentId, client: string | undefined): void => {
    if (client !== undefined && !punchShare.allow(`${target} ${client}`)) {
      refuseBy('punchesPerSecondPerTargetPerIp', 'target-ip-rate', 'too many punch requests towards that agent from your address', client);
    }
    if (!punchRate.allow(target)) refuseBy('punchesPerSecondPerTarget', 'target-rate', 'too many punch requests towards that agent', client ?? 'another instance');
  };
  const admitPunch = (target: AgentId, client: string | undefined): void => {
    limitPunch(target, client);
    metrics.punches++;
  };
  const tellPunch = async (request: ClusterRequest): Promise<void> => {
    const client = typeof request.client === 'string' && request.client.length <= 64 ? request.client : undefined;
    admitPunch(request.target, client);
    const record: SignedRecord = { record: Buffer.from(request.record.record, 'base64'), signature: Buffer.from(request.record.signature, 'base64') };
    // Where the peer registered from: the target dials only there (or its own LAN), whatever the record names.
    const seenAt = typeof request.seenAt === 'string' && request.seenAt.length <= 64 ? request.seenAt : undefined;
    await agent.send(request.target, 'nat.punch', { peer: request.peer, record, ...(seenAt !== undefined ? { seenAt } : {}) }, { timeoutMs: 5000 });
  };
  const address = advertisedAddress(agent.addresses[0]!, config.publicHost);
  const bus = redis ? new ClusterBus(redis, { id: agent.id, address }, tellPunch, config.redisPrefix) : undefined;

  // Within the per-IP request rate like lookups: with a cluster each answer reads the instance list from Redis, and
  // until 2026-11-24 rdv.info was the one request with no rate (an agent asks once per registration).
  agent.handle('rdv.info', async (_body: unknown, ctx) => {
    limitRequests(ctx);
    return {
      stun: stun.map((s) => ({ port: s.port, ...(config.publicHost ? { host: config.publicHost } : {}) })),
      relay: true,
      // Every live instance of the cluster: an agent that knows one learns where to fail over.
      ...(bus ? { instances: [...(await bus.instances()).values()] } : {}),
    };
  });

  agent.handle('rdv.register', async (signed: SignedRecord, ctx) => {
    const ip = ipOf(ctx.remoteAddress);
    if (!registrationRate.allow(ip)) refuseBy('registrationsPerSecondPerIp', 'rate', 'too many registrations from your address', clientOfIp(ip));
    let record;
    try {
      record = verifyRecord(signed);
    } catch (error) {
      return refuse((error as AgentError).code === 'UNAUTHENTICATED' ? 'forged' : 'invalid', error as AgentError);
    }
    if (record.agentId !== ctx.peer) refuse('forged', new AgentError('UNAUTHENTICATED', 'an agent registers its own record only'));
    if (record.expiresAt > Date.now() + config.maxRecordTtlMs) {
      refuse('invalid', new AgentError('INVALID_ARGUMENT', `records live at most ${config.maxRecordTtlMs} ms`));
    }
    // The store checks the sequence number and the limits atomically (one Lua script in Redis): two instances
    // given the same record cannot both accept it.
    const outcome = await registry.put({ record, signed, ip, ...(bus ? { instance: agent.id } : {}) }, limits);
    if (!outcome.stored) {
      if (outcome.reason === 'replayed') {
        refuse('replayed', new AgentError('INVALID_ARGUMENT', `replayed record: sequence ${record.seq} is not newer than ${outcome.storedSeq}`));
      }
      if (outcome.reason === 'full') refuseBy('maxRegistrations', 'full', 'registry full', clientOfIp(ip));
      refuseBy('maxRegistrationsPerIp', 'per-ip', 'too many agents registered from your address', clientOfIp(ip));
    }
    const isNew = outcome.stored && outcome.isNew;
    metrics.registered(isNew);
    if (isNew) log('info', 'registered', { agent: record.agentId, ip, nat: record.nat, candidates: record.candidates });
    return { expiresAt: record.expiresAt };
  });

  agent.handle('rdv.lookup', async (body: unknown, ctx) => {
    limitRequests(ctx);
    const agentId = agentIdIn(body, 'agentId');
    metrics.lookups++;
    return (await lookup(agentId)).signed;
  });

  // Where to open a relay to `target`: the instance holding its control channel (this one, or another of the cluster).
  agent.handle('rdv.route', async (body: unknown, ctx) => {
    limitRequests(ctx);
    const target = agentIdIn(body, 'target');
    const other = elsewhere(await lookup(target));
    if (!other) return { address };
    const found = (await bus!.instances()).get(other);
    if (!found) throw new AgentError('UNAVAILABLE', `${target}'s rendezvous instance is gone; it re-registers elsewhere at its next heartbeat`);
    return { address: found };
  });

  // Both agents get the other's record at the same moment: the caller in the reply, the target in a command.
  agent.handle('rdv.punch', async (body: unknown, ctx) => {
    limitRequests(ctx);
    const target = agentIdIn(body, 'target');
    const theirs = await lookup(target);
    const ours = await lookup(ctx.peer);
    const client = clientOf(ctx.remoteAddress);
    const other = elsewhere(theirs);
    if (other) {
      // The target's control channel is held by another instance: it counts the punch against the target's rate
      // and tells the target (Redis pub/sub), or answers RESOURCE_EXHAUSTED.
      // Checked here too, against this instance's own counts (a subset of the target's): during a rolling upgrade
      // an instance of before holding the target checks nothing.
      limitPunch(target, client);
      const record = { record: Buffer.from(ours.signed.record).toString('base64'), signature: Buffer.from(ours.signed.signature).toString('base64') };
      await bus!.request(other, { kind: 'punch', target, peer: ctx.peer, record, seenAt: ours.ip, client });
    } else {
      admitPunch(target, client);
      await agent.send(target, 'nat.punch', { peer: ctx.peer, record: ours.signed, seenAt: ours.ip }, { timeoutMs: 5000 });
    }
    return theirs.signed;
  });

  agent.handleTunnel('rdv.relay', async (body: unknown, ctx) => {
    limitRequests(ctx);
    const target = agentIdIn(body, 'target');
    await lookup(ctx.peer);
    // The caller asks rdv.route first: a relay is opened at the instance holding the target's control channel.
    const theirs = await lookup(target);
    if (elsewhere(theirs)) throw new AgentError('UNAVAILABLE', `${target} is connected to another rendezvous instance: ask rdv.route`);
    // The relay holds its place from here: callers that ask together cannot all pass before one of them is counted.
    let slot: RelaySlot;
    try {
      slot = relays.admit(ctx.peer, target, clientOf(ctx.remoteAddress), clientOfIp(theirs.ip));
    } catch (error) {
      refusalLog.refused('relay', clientOf(ctx.remoteAddress), (error as AgentError).message);
      return refuse('relay-limit', error as AgentError);
    }
    let toTarget: ChannelStream;
    try {
      ({ stream: toTarget } = await agent.openTunnel(target, 'nat.relay', { from: ctx.peer }, { timeoutMs: 10_000, signal: ctx.signal }));
    } catch (error) {
      slot.release();
      throw error;
    }
    // A call that ends before its tunnel opens gets no pipe: the target's tunnel is closed and the place given
    // back. Core aborts a tunnel call's signal only at its deadline (it does not watch the caller until the tunnel
    // is handed over); a caller that reset before that is met by the pipe, whose first read fails.
    let opened = false;
    const abandoned = (): void => {
      if (opened) return;
      opened = true; // settled: neither a late onOpen nor the timer below acts again
      clearTimeout(unopened);
      ctx.signal.removeEventListener('abort', abandoned);
      toTarget.reset(new AgentError('CANCELLED', 'the relay caller left before its tunnel opened'));
      slot.release();
    };
    // Core hands the tunnel over (onOpen) right after sending the acceptance. When that fails after we returned
    // (the caller sent bytes behind its request, or the stream broke), core aborts ctx.signal instead (since
    // 2026-11-24; before, nothing came and the place was held for good: a stranger pinned maxRelaysPerTarget
    // towards any agent). Kept as a backstop: a relay not opened within relayIdleMs is given back, as an idle one is.
    const unopened = setTimeout(abandoned, config.relayIdleMs);
    unopened.unref();
    if (ctx.signal.aborted) abandoned();
    else ctx.signal.addEventListener('abort', abandoned, { once: true });
    log('info', 'relay opened', { from: ctx.peer, to: target });
    return {
      accept: true,
      onOpen: (fromCaller) => {
        if (opened) return fromCaller.reset(new AgentError('CANCELLED', 'the relay was given up before its tunnel opened'));
        opened = true;
        clearTimeout(unopened);
        ctx.signal.removeEventListener('abort', abandoned);
        relays.pipe(slot, fromCaller, toTarget);
      },
    };
  });

  const sweeper = setInterval(() => {
    registry
      .sweep(Date.now())
      .then(async (dropped) => {
        if (dropped > 0) log('info', 'records expired', { dropped, registered: await registry.size() });
      })
      .catch(() => undefined); // the store is away: /healthz says so, and the next sweep tries again
  }, SWEEP_MS);
  sweeper.unref();
  // The listener's refusals before TLS (per-IP connection rate and count) know no agent: their counts, each interval.
  const listenerWatch = setInterval(() => refusalLog.listenerRefusals(agent.stats().refusals), LISTENER_REFUSALS_LOG_MS);
  listenerWatch.unref();

  const health = async (): Promise<RendezvousHealth> => {
    const registered = await registry.size().catch(() => undefined);
    if (!redis) return { ok: registered !== undefined, store: 'memory', ...(registered !== undefined ? { registered } : {}), relays: relays.count };
    const instances = await bus!.instances().then((i) => i.size, () => undefined);
    const up = redis.ready && registered !== undefined;
    return { ok: up, store: 'redis', redis: up ? 'up' : 'down', ...(registered !== undefined ? { registered } : {}), relays: relays.count, ...(instances !== undefined ? { instances } : {}) };
  };

  let http: Server | undefined;
  if (config.httpPort >= 0) {
    http = createServer((request, response) => {
      if (request.url === '/healthz') {
        void health().then((state) => {
          // 503 while the store is unreachable: a load balancer or orchestrator takes this instance out.
          response.writeHead(state.ok ? 200 : 503, { 'content-type': 'application/json' });
          response.end(JSON.stringify(state));
        });
      } else if (request.url === '/metrics') {
        void health().then((state) => {
          response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
          response.end(metrics.prometheus(state, relays, agent, bus));
        });
      } else {
        response.writeHead(404).end();
      }
    });
    const server = http;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.httpPort, config.host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (error) {
      // As a STUN port that cannot be bound: nothing is left open.
      clearInterval(sweeper);
      clearInterval(listenerWatch);
      await Promise.all(stun.map((s) => s.close()));
      await agent.close();
      await registry.close();
      await redis?.close();
      throw listenError('the HTTP port (--http-port)', config.host, config.httpPort, error);
    }
  }
  const httpPort = http ? (http.address() as { port: number }).port : undefined;
  await bus?.start();
  log('info', 'rendezvous started', { address, stunPorts: stun.map((s) => s.port), httpPort, store: redis ? 'redis' : 'memory' });

  return {
    agent,
    address,
    stunPorts: [stun[0]!.port, stun[1]!.port],
    httpPort,
    registry,
    metrics,
    config,
    health,
    async close() {
      clearInterval(sweeper);
      clearInterval(listenerWatch);
      await bus?.close();
      await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
      http?.closeAllConnections();
      await Promise.all(stun.map((s) => s.close()));
      await agent.close();
      await registry.close();
      await redis?.close();
      log('info', 'rendezvous stopped');
    },
  };
}

/** The address other instances and agents dial: the listening one, with `publicHost` when set (behind NAT or in a container). */
function advertisedAddress(listening: string, publicHost: string | undefined): string {
  if (!publicHost) return listening;
  const at = listening.indexOf('@');
  const url = new URL(listening.slice(at + 1));
  url.hostname = publicHost;
  return `${listening.slice(0, at)}@${url.toString()}`;
}

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
