import { createServer, type Server } from 'node:http';
import { AgentError, createAgent, loadOrCreateIdentity, type Agent, type AgentId, type CallContext, type Identity } from '@agentlink/core';
import { startStunServer, verifyRecord, type SignedRecord } from '@agentlink/nat';
import { webSocket } from '@agentlink/ws';
import { DEFAULT_CONFIG, type RendezvousConfig } from './config.js';
import { PerIpRate, ipOf } from './ip-limits.js';
import { silentLogger, type Logger } from './log.js';
import { MemoryRegistry, type RegistryStore } from './registry.js';
import { RendezvousMetrics } from './metrics.js';
import { Relays } from './relay.js';

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
  close(): Promise<void>;
}

const SWEEP_MS = 1000;
/** Control messages are small: records, lookups, punch requests. */
const MAX_FRAME = 64 * 1024;

/**
 * Starts the rendezvous: an agentlink agent on a wss control port (agents prove their key by mutual TLS), two
 * STUN ports, and an HTTP port for /healthz and /metrics. Methods: rdv.info, rdv.register, rdv.lookup,
 * rdv.punch, and the rdv.relay tunnel.
 */
export async function startRendezvous(options: RendezvousOptions = {}): Promise<Rendezvous> {
  const config: RendezvousConfig = { ...DEFAULT_CONFIG, ...definedOnly(options) };
  const log = options.log ?? silentLogger;
  const identity = options.identity ?? (config.keyFile ? await loadOrCreateIdentity(config.keyFile) : undefined);
  const registry = options.registry ?? new MemoryRegistry();
  const metrics = new RendezvousMetrics();
  const relays = new Relays(config, options.relayTap);
  const registrationRate = new PerIpRate(config.registrationsPerSecondPerIp);
  const requestRate = new PerIpRate(config.requestsPerSecondPerIp);

  const connectionRate = new PerIpRate(config.connectionsPerSecondPerIp);
  const admitConnection = (ip: string): boolean => {
    if (connectionRate.allow(ip)) return true;
    metrics.rejected('connections');
    return false;
  };
  const agent = await createAgent({
    identity,
    channels: [
      webSocket({
        port: config.port,
        host: config.host,
        admitConnection,
        // Every registered agent holds a connection: the listener's limits follow the rendezvous's own, not an
        // agent listener's defaults (4,096 connections, 1,024 per IP). The rate is admitConnection's (tighter):
        // the listener's stays at its default unless the rendezvous allows more.
        limits: {
          maxConnections: config.maxRegistrations,
          maxConnectionsPerIp: config.maxRegistrationsPerIp,
          newConnectionsPerIpPerSecond: Math.max(200, Math.ceil(config.connectionsPerSecondPerIp)),
        },
      }),
    ],
    maxFrameSize: MAX_FRAME,
  });
  const stun = await Promise.all(config.stunPorts.map((port) => startStunServer(config.host, port)));

  const refuse = (reason: string, error: AgentError): never => {
    metrics.rejected(reason);
    throw error;
  };
  const limitRequests = (ctx: CallContext): void => {
    if (!requestRate.allow(ipOf(ctx.remoteAddress))) refuse('rate', new AgentError('RESOURCE_EXHAUSTED', 'too many requests from your address'));
  };
  const lookup = (id: AgentId): SignedRecord => {
    const entry = registry.get(id);
    if (!entry) throw new AgentError('NOT_FOUND', `${id} is not registered`);
    return entry.signed;
  };

  agent.handle('rdv.info', () => ({
    stun: stun.map((s) => ({ port: s.port, ...(config.publicHost ? { host: config.publicHost } : {}) })),
    relay: true,
  }));

  agent.handle('rdv.register', (signed: SignedRecord, ctx) => {
    const ip = ipOf(ctx.remoteAddress);
    if (!registrationRate.allow(ip)) refuse('rate', new AgentError('RESOURCE_EXHAUSTED', 'too many registrations from your address'));
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
    const existing = registry.get(record.agentId);
    if (existing && record.seq <= existing.record.seq) {
      refuse('replayed', new AgentError('INVALID_ARGUMENT', `replayed record: sequence ${record.seq} is not newer than ${existing.record.seq}`));
    }
    if (!existing) {
      if (registry.size >= config.maxRegistrations) refuse('full', new AgentError('RESOURCE_EXHAUSTED', 'registry full'));
      if (registry.countByIp(ip) >= config.maxRegistrationsPerIp) refuse('per-ip', new AgentError('RESOURCE_EXHAUSTED', 'too many agents registered from your address'));
    }
    registry.put({ record, signed, ip });
    metrics.registered(existing === undefined);
    if (!existing) log('info', 'registered', { agent: record.agentId, ip, nat: record.nat, candidates: record.candidates });
    return { expiresAt: record.expiresAt };
  });

  agent.handle('rdv.lookup', ({ agentId }: { agentId: AgentId }, ctx) => {
    limitRequests(ctx);
    metrics.lookups++;
    return lookup(agentId);
  });

  // Both agents get the other's record at the same moment: the caller in the reply, the target in a command.
  agent.handle('rdv.punch', async ({ target }: { target: AgentId }, ctx) => {
    limitRequests(ctx);
    const theirs = lookup(target);
    const ours = lookup(ctx.peer);
    metrics.punches++;
    await agent.send(target, 'nat.punch', { peer: ctx.peer, record: ours }, { timeoutMs: 5000 });
    return theirs;
  });

  agent.handleTunnel('rdv.relay', async ({ target }: { target: AgentId }, ctx) => {
    limitRequests(ctx);
    lookup(ctx.peer);
    lookup(target);
    relays.admit(ctx.peer);
    const { stream: toTarget } = await agent.openTunnel(target, 'nat.relay', { from: ctx.peer }, { timeoutMs: 10_000 });
    log('info', 'relay opened', { from: ctx.peer, to: target });
    return { accept: true, onOpen: (fromCaller) => relays.pipe(ctx.peer, target, fromCaller, toTarget) };
  });

  const sweeper = setInterval(() => {
    const dropped = registry.sweep(Date.now());
    if (dropped > 0) log('info', 'records expired', { dropped, registered: registry.size });
  }, SWEEP_MS);
  sweeper.unref();

  let http: Server | undefined;
  if (config.httpPort >= 0) {
    http = createServer((request, response) => {
      if (request.url === '/healthz') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ ok: true, registered: registry.size, relays: relays.count }));
      } else if (request.url === '/metrics') {
        response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        response.end(metrics.prometheus(registry.size, relays));
      } else {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => http!.listen(config.httpPort, config.host, resolve));
  }
  const httpPort = http ? (http.address() as { port: number }).port : undefined;
  const address = agent.addresses[0]!;
  log('info', 'rendezvous started', { address, stunPorts: stun.map((s) => s.port), httpPort });

  return {
    agent,
    address,
    stunPorts: [stun[0]!.port, stun[1]!.port],
    httpPort,
    registry,
    metrics,
    async close() {
      clearInterval(sweeper);
      await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
      http?.closeAllConnections();
      for (const s of stun) s.close();
      await agent.close();
      log('info', 'rendezvous stopped');
    },
  };
}

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
