/**
 * Scale figures of the rendezvous' registry (docs/rendezvous.md, "Clusters"): run once by hand, with redis-server
 * installed (`pnpm test:redis` installs it):
 *
 *   node --expose-gc --conditions=source --import tsx apps/rendezvous/scripts/cluster-scale.ts store [agents=100000]
 *   node --conditions=source --import tsx apps/rendezvous/scripts/cluster-scale.ts kill [heartbeating=1000]
 *
 * 1. Registrations and lookups of N agents across 3 "instances" (3 Redis connections, as 3 processes hold), each
 *    registration verified (signature, shape) as rdv.register does and stored by the atomic put, each lookup
 *    verified again on read; next to the in-memory store. Memory per record: Redis INFO used_memory before and
 *    after; the memory store's heap growth after GC. The wire (TLS, WebSocket, the agent's call) is not in these
 *    figures: it is the same for both stores.
 * 2. Killing an instance under load: M agents heartbeating to 3 instance processes; one is killed with SIGKILL;
 *    for each of its agents, the time until it is registered with another instance.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createAgent, Identity, type Agent, type AgentId } from '@agentlink/core';
import { RendezvousClient, signRecord, verifyRecord, type SignedRecord } from '@agentlink/nat';
import { webSocket } from '@agentlink/ws';
import { MemoryRegistry, RedisRegistry, connectRedis, type RegistryStore } from '../src/index.js';
import { instanceProcess } from '../test/instance-process.js';
import { startTestRedis } from '../test/redis-server.js';

const PART = process.argv[2];
const AGENTS = Number(PART === 'store' ? (process.argv[3] ?? 100_000) : 0);
const HEARTBEATING = Number(PART === 'kill' ? (process.argv[3] ?? 1000) : 0);
const INFLIGHT = 64;
const LIMITS = { maxRegistrations: 1_000_000, maxRegistrationsPerIp: 1_000_000 };
const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

function signedRecords(n: number): SignedRecord[] {
  // Signing is the agents' work, not the rendezvous': done before the clock starts.
  const now = Date.now();
  return Array.from({ length: n }, (_, i) => {
    const key = Identity.generate();
    return signRecord(key, {
      agentId: key.id,
      candidates: [`quic://198.51.100.${i % 250}:${10000 + (i % 50000)}`, `quic://10.0.${(i >> 8) & 255}.${i & 255}:4433`],
      nat: 'cone',
      portDelta: 0,
      seq: Date.now(),
      expiresAt: now + 3_600_000,
    });
  });
}

/** Registers every record through the instances' stores (shared work queue), then looks every agent up. */
async function run(stores: RegistryStore[], signed: SignedRecord[], ids: AgentId[]): Promise<{ registrations: number; lookups: number }> {
  let next = 0;
  const workers = (work: (store: RegistryStore, i: number) => Promise<void>): Promise<void[]> =>
    Promise.all(
      stores.flatMap((store) =>
        Array.from({ length: INFLIGHT }, async () => {
          while (next < signed.length) await work(store, next++);
        }),
      ),
    );
  const t0 = performance.now();
  await workers(async (store, i) => {
    const outcome = await store.put({ record: verifyRecord(signed[i]!), signed: signed[i]!, ip: `198.51.100.${i % 250}` }, LIMITS);
    if (!outcome.stored) throw new Error(`refused: ${outcome.reason}`);
  });
  const registrations = signed.length / ((performance.now() - t0) / 1000);
  next = 0;
  let found = 0;
  const t1 = performance.now();
  await workers(async (store, i) => {
    if (await store.get(ids[i]!)) found++;
  });
  if (found !== ids.length) throw new Error(`found ${found} of ${ids.length}`);
  return { registrations, lookups: ids.length / ((performance.now() - t1) / 1000) };
}

async function usedMemory(url: string): Promise<number> {
  const c = await connectRedis(url);
  const info = String(await c.command<Buffer>(['INFO', 'memory']));
  await c.close();
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function storeFigures(): Promise<void> {
  console.log(`signing ${AGENTS} records…`);
  const signed = signedRecords(AGENTS);
  const ids = signed.map((s) => verifyRecord(s).agentId);

  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const memory = new MemoryRegistry();
  const mem = await run([memory], signed, ids);
  gc();
  const heapPerRecord = (process.memoryUsage().heapUsed - heapBefore) / AGENTS;
  await memory.close();

  const redis = await startTestRedis();
  try {
    const before = await usedMemory(redis.url);
    const connections = await Promise.all([1, 2, 3].map(() => connectRedis(redis.url)));
    const prefix = `scale${randomUUID()}:`;
    const red = await run(connections.map((c) => new RedisRegistry(c, { prefix })), signed, ids);
    const after = await usedMemory(redis.url);
    await Promise.all(connections.map((c) => c.close()));
    console.log(
      JSON.stringify({
        agents: AGENTS,
        memory: { registrationsPerSecond: Math.round(mem.registrations), lookupsPerSecond: Math.round(mem.lookups), heapBytesPerRecord: Math.round(heapPerRecord) },
        redis3: { registrationsPerSecond: Math.round(red.registrations), lookupsPerSecond: Math.round(red.lookups), usedMemoryBytesPerRecord: Math.round((after - before) / AGENTS) },
      }),
    );
  } finally {
    await redis.stop();
  }
}

/** A rendezvous instance in its own process, with limits sized for many agents from one loopback address. */
async function instance(redisUrl: string, prefix: string): Promise<{ address: string; child: ChildProcess }> {
  const script = fileURLToPath(new URL('./instance.ts', import.meta.url));
  const options = {
    host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: -1, redisUrl, redisPrefix: prefix,
    // Every agent of this run comes from 127.0.0.1: the per-IP limits sized for that.
    registrationsPerSecondPerIp: 100_000, connectionsPerSecondPerIp: 100_000, requestsPerSecondPerIp: 100_000,
    maxConnectionsPerIp: 100_000, maxRegistrationsPerIp: 100_000,
  };
  return instanceProcess(script, [JSON.stringify(options)]);
}

async function killUnderLoad(): Promise<void> {
  const heartbeatMs = 5000;
  const redis = await startTestRedis();
  const prefix = `kill${randomUUID()}:`;
  const instances = await Promise.all([1, 2, 3].map(() => instance(redis.url, prefix)));
  // Whatever happens, the instance processes and the server end with the run.
  process.once('exit', () => {
    for (const i of instances) i.child.kill('SIGKILL');
  });
  process.once('uncaughtException', (error) => {
    console.error(error);
    void redis.stop().finally(() => process.exit(1));
  });
  const addresses = instances.map((i) => i.address);
  const agents: Array<{ agent: Agent; client: RendezvousClient; movedAt?: number; failures: number }> = [];
  let killedAt = 0;
  console.log(`starting ${HEARTBEATING} agents, heartbeat ${heartbeatMs} ms…`);
  for (let i = 0; i < HEARTBEATING; i++) {
    const agent = await createAgent({ channels: [webSocket()] });
    // Each agent starts at one instance in turn (a load balancer's spread), and knows the other two.
    const list = [0, 1, 2].map((k) => addresses[(i + k) % 3]!);
    const state = { agent, client: undefined as unknown as RendezvousClient, movedAt: undefined as number | undefined, failures: 0 };
    let seq = 0;
    let inFlight: Promise<void> | undefined;
    // One registration at a time, as reach() does.
    const register = (): Promise<void> => (inFlight ??= registerOnce().finally(() => (inFlight = undefined)));
    const registerOnce = (): Promise<void> =>
      state.client
        .publishWith(async () => {
          seq = Math.max(seq + 1, Date.now());
          return signRecord(agent.identity, { agentId: agent.id, candidates: ['quic://127.0.0.1:9'], nat: 'none', portDelta: 0, seq, expiresAt: Date.now() + 3 * heartbeatMs });
        })
        .then(
          (id) => {
            if (killedAt && state.movedAt === undefined && id !== instances[0]!.address.split('@')[0]) state.movedAt = performance.now() - killedAt;
          },
          () => void state.failures++,
        );
    // The same reaction as reach(): a lost control channel re-registers after a random part of half a heartbeat.
    state.client = new RendezvousClient(agent, list, () => void setTimeout(() => void register(), Math.random() * (heartbeatMs / 2)));
    await register();
    setInterval(() => void register(), heartbeatMs).unref();
    agents.push(state);
  }
  const doomedId = addresses[0]!.split('@')[0]!;
  const onDoomed = agents.filter((a) => a.client.currentId === doomedId);
  console.log(`${onDoomed.length} agents registered with the instance to kill; heartbeating for ${heartbeatMs * 2} ms…`);
  await new Promise((resolve) => setTimeout(resolve, heartbeatMs * 2));
  killedAt = performance.now();
  instances[0]!.child.kill('SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, heartbeatMs * 3));
  const moved = onDoomed.map((a) => a.movedAt).filter((t): t is number => t !== undefined).sort((x, y) => x - y);
  const pct = (p: number): number => Math.round(moved[Math.min(moved.length - 1, Math.floor(p * moved.length))] ?? NaN);
  console.log(JSON.stringify({ heartbeatMs, agents: HEARTBEATING, onKilledInstance: onDoomed.length, moved: moved.length, missingMs: { p50: pct(0.5), p99: pct(0.99), max: Math.round(moved.at(-1) ?? NaN) } }));
  // The store's view (a loaded machine may take a while to answer: retried).
  let c: Awaited<ReturnType<typeof connectRedis>> | undefined;
  for (let attempt = 0; !c && attempt < 10; attempt++) c = await connectRedis(redis.url).catch(() => undefined);
  if (!c) throw new Error('Redis did not answer for the final check');
  const store = new RedisRegistry(c, { prefix });
  let live = 0;
  let onDead = 0;
  for (const a of agents) {
    const entry = await store.get(a.agent.id);
    if (entry) live++;
    if (entry?.instance === doomedId) onDead++;
  }
  await c.close();
  console.log(JSON.stringify({ afterThreeHeartbeats: { liveRecords: live, stillOnKilledInstance: onDead, registrationFailures: agents.reduce((n, a) => n + a.failures, 0) } }));
  await Promise.all(agents.map((a) => a.agent.close()));
  for (const i of instances.slice(1)) i.child.kill('SIGTERM');
  await redis.stop();
}

if (PART === 'store') await storeFigures();
else if (PART === 'kill') await killUnderLoad();
else throw new Error('cluster-scale.ts store [agents] | kill [heartbeating]');
process.exit(0);
