import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { CallMetrics, Identity, type AgentError, type AgentId } from '@agentlink/core';
import { signRecord, type PeerRecord } from '@agentlink/nat';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type Rendezvous } from '../src/index.js';
import { instanceProcess } from './instance-process.js';
import { cleanup, failure, reachableAgent, recordOf, rendezvous, sleep, udpListener, wsClient } from './helpers.js';
import { startTestRedis, type TestRedis } from './redis-server.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});
afterEach(cleanup);

/** Three instances sharing one Redis under a prefix of this test's own. */
async function cluster(options: Parameters<typeof rendezvous>[0] = {}): Promise<[Rendezvous, Rendezvous, Rendezvous]> {
  const redisPrefix = `c${randomUUID()}:`;
  const start = (): Promise<Rendezvous> => rendezvous({ redisUrl: redis.url, redisPrefix, ...options });
  return Promise.all([start(), start(), start()]);
}

/** An instance in its own process (the same command as in production), to be killed with SIGKILL. */
async function processInstance(redisPrefix: string): Promise<{ address: string; id: AgentId; kill(): void }> {
  const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
  const { address, child } = await instanceProcess(main, [
    '--host', '127.0.0.1', '--port', '0', '--stun-ports', '0,0', '--http-port=-1', '--redis-url', redis.url, '--redis-prefix', redisPrefix,
  ]);
  return { address, id: address.split('@')[0] as AgentId, kill: () => child.kill('SIGKILL') };
}

async function metric(r: Rendezvous, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${r.httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

/** Polls `check` (store answers, not time) until it holds. */
async function until(check: () => Promise<boolean> | boolean, what: string, tries = 400): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`never: ${what}`);
}

describe('three rendezvous instances sharing Redis', () => {
  it('agents registered with different instances find each other, and relay through the instance holding the target', async () => {
    const [r1, r2, r3] = await cluster();
    const b = await reachableAgent(r2, { paths: ['relay'] });
    b.agent.handle('echo', (x: unknown) => x);
    const a = await reachableAgent(r1, { paths: ['relay'] });
    // Every instance answers lookups for every agent.
    for (const r of [r1, r2, r3]) expect((await r.registry.get(b.agent.id))?.instance).toBe(r2.agent.id);
    expect(await a.agent.send(b.agent.id, 'echo', 'across instances')).toBe('across instances');
    expect(await a.agent.pathTo(b.agent.id)).toMatchObject({ path: 'relay' });
    // The caller was sent to B's instance (rdv.route): it relays, A's own instance carries no relayed byte.
    expect(await metric(r2, 'rendezvous_relay_bytes_total')).toBeGreaterThan(0);
    expect(await metric(r1, 'rendezvous_relay_bytes_total')).toBe(0);
    // A learned the other instances from the one it registered with: three addresses to fail over to.
    expect((await r1.health()).instances).toBe(3);
  });

  it('a punch requested at one instance reaches the target through the instance holding its control channel', async () => {
    const [r1, r2] = await cluster();
    const b = await reachableAgent(r2, { paths: ['punch'] });
    b.agent.handle('echo', (x: unknown) => x);
    const a = await reachableAgent(r1, { paths: ['punch'] });
    expect(await a.agent.send(b.agent.id, 'echo', 'punched')).toBe('punched');
    expect((await a.agent.pathTo(b.agent.id)).path).toBe('punched');
    expect(await metric(r1, 'rendezvous_cluster_requests_total{direction="sent"}')).toBe(1);
    expect(await metric(r2, 'rendezvous_cluster_requests_total{direction="served"}')).toBe(1);
  });

  it("a punch relayed between instances carries where the stranger registered from: the target dials nothing else", async () => {
    const [r1, r2] = await cluster();
    const victim = await reachableAgent(r2);
    const thirdParty = await udpListener('127.0.0.2');
    const own = await udpListener('127.0.0.3');
    try {
      const stranger = await wsClient('127.0.0.3');
      const candidates = [...Array.from({ length: 15 }, () => `quic://127.0.0.2:${thirdParty.port}`), `quic://127.0.0.3:${own.port}`];
      await stranger.send(r1.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity, { candidates })));
      await stranger.send(r1.address, 'rdv.punch', { target: victim.agent.id });
      await once(own.socket, 'message'); // the stranger's own address hears from the victim (see punch-reflection.test.ts)
      await new Promise((resolve) => setImmediate(resolve));
      expect(thirdParty.datagrams).toEqual([]);
      expect(await metric(r2, 'rendezvous_cluster_requests_total{direction="served"}')).toBe(1);
    } finally {
      thirdParty.socket.close();
      own.socket.close();
    }
  });

  /** `count` punch requests towards `target` from a client at `ip`, registered once, asked through each of `instances` at once. */
  async function punchesThrough(instances: Rendezvous[], target: AgentId, ip: string, count: number): Promise<string[]> {
    const stranger = await wsClient(ip);
    await stranger.send(instances[0]!.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity, { candidates: [`quic://${ip}:9`] })));
    return (
      await Promise.all(
        instances.map((r) =>
          Promise.all(Array.from({ length: count }, () => stranger.send(r.address, 'rdv.punch', { target }).then(() => 'ok', (e: AgentError) => e.code))),
        ),
      )
    ).flat();
  }

  it("punches towards one agent are counted across the cluster: asking every instance does not multiply the agent's rate", async () => {
    // Each address's share lifted above its asks: this is about the target's rate (5/s, burst 10).
    const instances = await cluster({ punchesPerSecondPerTarget: 5, punchesPerSecondPerTargetPerIp: 100 });
    const served = new CallMetrics();
    const victim = await reachableAgent(instances[1], {}, { inboundInterceptors: [served.inboundInterceptor] });
    const started = performance.now();
    const outcomes = (await Promise.all(['127.0.0.3', '127.0.0.4'].map((ip) => punchesThrough(instances, victim.agent.id, ip, 20)))).flat();
    const seconds = (performance.now() - started) / 1000;
    const forwarded = outcomes.filter((x) => x === 'ok').length;
    // The burst and what refilled meanwhile, whichever instance was asked; counted per instance (until
    // 2026-11-24) each of the three forwarded its own burst: 30 of the 120 at once.
    expect(forwarded).toBeGreaterThanOrEqual(10);
    expect(forwarded).toBeLessThanOrEqual(10 + Math.ceil(5 * seconds));
    expect(outcomes.filter((x) => x === 'RESOURCE_EXHAUSTED')).toHaveLength(120 - forwarded);
    expect(served.snapshot().served.methods['nat.punch']?.count).toBe(forwarded);
    // The instance holding the victim counted them all.
    expect(await metric(instances[1], 'rendezvous_punches_total')).toBe(forwarded);
  });

  it("one address's share of an agent's punch rate is one across the cluster", async () => {
    const instances = await cluster({ punchesPerSecondPerTarget: 50, punchesPerSecondPerTargetPerIp: 1 });
    const served = new CallMetrics();
    const victim = await reachableAgent(instances[1], {}, { inboundInterceptors: [served.inboundInterceptor] });
    const started = performance.now();
    const outcomes = await punchesThrough(instances, victim.agent.id, '127.0.0.3', 10);
    const seconds = (performance.now() - started) / 1000;
    const forwarded = outcomes.filter((x) => x === 'ok').length;
    // Its share's burst (2 × 1) and what refilled meanwhile; per instance (until 2026-11-24) it had 6 at once.
    expect(forwarded).toBeGreaterThanOrEqual(2);
    expect(forwarded).toBeLessThanOrEqual(2 + Math.ceil(seconds));
    expect(outcomes.filter((x) => x === 'RESOURCE_EXHAUSTED')).toHaveLength(30 - forwarded);
    expect(served.snapshot().served.methods['nat.punch']?.count).toBe(forwarded);
    // Another address still gets its punch through, from any instance.
    expect(await punchesThrough([instances[2]], victim.agent.id, '127.0.0.4', 1)).toEqual(['ok']);
  });

  it('a punch from an instance of before (no seenAt in its message) is still carried out, as before: dialling the record', async () => {
    // Mixed versions during a rolling upgrade: an older instance publishes the request without `seenAt`.
    const redisPrefix = `c${randomUUID()}:`;
    const r2 = await rendezvous({ redisUrl: redis.url, redisPrefix });
    const victim = await reachableAgent(r2);
    const own = await udpListener('127.0.0.3');
    const bus = await connectRedis(redis.url);
    try {
      const stranger = Identity.generate();
      const signed = signRecord(stranger, recordOf(stranger, { candidates: [`quic://127.0.0.3:${own.port}`] }));
      const olderInstance = Identity.generate().id;
      const body = {
        kind: 'punch',
        target: victim.agent.id,
        peer: stranger.id,
        record: { record: Buffer.from(signed.record).toString('base64'), signature: Buffer.from(signed.signature).toString('base64') },
      };
      await bus.command(['PUBLISH', `${redisPrefix}instance:${r2.agent.id}`, JSON.stringify({ t: 'req', id: randomUUID(), from: olderInstance, body })]);
      await once(own.socket, 'message'); // the victim answers the punch
      expect(own.datagrams[0]).toBeGreaterThanOrEqual(1200); // a QUIC Initial
      expect(await metric(r2, 'rendezvous_cluster_requests_total{direction="served"}')).toBe(1);
    } finally {
      own.socket.close();
      await bus.close();
    }
  });

  it('an instance killed: its agents re-register elsewhere within two heartbeats; calls between other agents go on', async () => {
    const heartbeatMs = 1000;
    const [r1, r2] = await cluster();
    // The third instance runs in its own process, under the same prefix as r1 and r2.
    const prefix = await prefixOf(r1);
    const doomed = await processInstance(prefix);
    const c1 = await reachableAgent(r1, { heartbeatMs });
    const onDoomed = await Promise.all([0, 1].map(() => reachableAgentAt([doomed.address, r1.address, r2.address], r1, heartbeatMs)));
    for (const c of onDoomed) expect((await r1.registry.get(c.agent.id))?.instance).toBe(doomed.id);
    // A call in progress between agents of the surviving instances, relayed by r2.
    const b = await reachableAgent(r2, { paths: ['relay'], heartbeatMs });
    b.agent.handleStream('ticks', async function* (n: number) {
      for (let i = 0; i < n; i++) {
        await sleep(25);
        yield i;
      }
    });
    const a = await reachableAgent(r1, { paths: ['relay'], heartbeatMs });
    const ticks: number[] = [];
    const streaming = (async () => {
      for await (const tick of a.agent.stream<number>(b.agent.id, 'ticks', 100)) ticks.push(tick);
    })();
    await until(() => ticks.length > 5, 'the stream started');

    doomed.kill();
    const killedAt = performance.now();
    const movedAfter: number[] = [];
    await Promise.all(
      onDoomed.map(async (c) => {
        await until(async () => {
          const entry = await r1.registry.get(c.agent.id);
          return entry !== undefined && entry.instance !== doomed.id;
        }, 're-registered elsewhere');
        movedAfter.push(performance.now() - killedAt);
      }),
    );
    // The bound: no agent of the killed instance is unreachable through the cluster for two heartbeats.
    expect(Math.max(...movedAfter)).toBeLessThan(2 * heartbeatMs);
    await streaming;
    expect(ticks).toEqual(Array.from({ length: 100 }, (_, i) => i));
    // The moved agents are found again: a call from an agent of r1 to one that was on the killed instance.
    onDoomed[0]!.agent.handle('echo', (x: unknown) => x);
    expect(await c1.agent.send(onDoomed[0]!.agent.id, 'echo', 'moved')).toBe('moved');
  });

  it('instances replaced one after another (a new key each deploy): agents forget the gone ones, learn the new, fail over and relay there', async () => {
    // An agent keeps 16 rendezvous addresses at most. Kept for good (until 2026-11-24), fifteen replaced instances
    // filled the places: the agent learned no new instance, registered nowhere once its own stopped, and a relay
    // towards an agent of a new instance was opened at the wrong one (UNAVAILABLE).
    const r1 = await rendezvous({ redisUrl: redis.url, redisPrefix: `c${randomUUID()}:` });
    const start = (): Promise<Rendezvous> => rendezvous({ redisUrl: redis.url, redisPrefix: r1.config.redisPrefix });
    const a = await reachableAgent(r1, { paths: ['relay'], heartbeatMs: 30_000 });
    for (let i = 0; i < 15; i++) {
      const replaced = await start();
      await a.nat.register(); // at r1, whose rdv.info lists the instance of the moment
      await replaced.close();
    }
    const latest = await start();
    const b = await reachableAgent(latest, { paths: ['relay'], heartbeatMs: 30_000 });
    b.agent.handle('echo', (x: unknown) => x);
    await a.nat.register();
    expect(await a.agent.send(b.agent.id, 'echo', 'relayed at the new instance')).toBe('relayed at the new instance');
    expect(await metric(latest, 'rendezvous_relay_bytes_total')).toBeGreaterThan(0);
    // A's own instance stops: its next registration goes to the one live instance it learned.
    await r1.close();
    await a.nat.register();
    expect(a.nat.registeredWith).toBe(latest.agent.id);
    expect((await latest.registry.get(a.agent.id))?.instance).toBe(latest.agent.id);
  });

  it('Redis restarted empty: the registry refills from heartbeats, /healthz says down meanwhile', async () => {
    const heartbeatMs = 400;
    const [r1, r2] = await cluster();
    const a = await reachableAgent(r1, { heartbeatMs });
    const b = await reachableAgent(r2, { heartbeatMs });
    await redis.kill();
    const down = await fetch(`http://127.0.0.1:${r1.httpPort}/healthz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ ok: false, store: 'redis', redis: 'down' });
    await redis.start();
    await until(async () => (await r1.health()).ok, 'Redis back');
    await until(async () => (await r2.registry.get(a.agent.id)) !== undefined && (await r1.registry.get(b.agent.id)) !== undefined, 'records back');
    await until(async () => (await r1.health()).instances === 3, 'instances announced again');
    const health = await fetch(`http://127.0.0.1:${r1.httpPort}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, store: 'redis', redis: 'up', registered: 2 });
  });

  it('a replayed or forged record is refused by every instance, and a record forged in Redis is served by none', async () => {
    const instances = await cluster();
    const client = await wsClient();
    const me = client.identity;
    const record = (overrides: Partial<PeerRecord> = {}): PeerRecord => recordOf(me, { seq: 10, ...overrides });
    const signed = signRecord(me, record());
    await client.send(instances[0].address, 'rdv.register', signed);
    const tampered = { record: Buffer.from(signed.record), signature: signed.signature };
    tampered.record[tampered.record.length - 3]! ^= 1;
    for (const r of instances) {
      expect(await failure(client.send(r.address, 'rdv.register', signed))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/replayed/) });
      expect(await failure(client.send(r.address, 'rdv.register', signRecord(me, record({ seq: 9 }))))).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(await failure(client.send(r.address, 'rdv.register', tampered))).toMatchObject({ code: 'UNAUTHENTICATED' });
      expect(r.metrics.rejectedCount('replayed')).toBe(2);
      expect(r.metrics.rejectedCount('forged')).toBe(1);
    }
    // Someone with write access to Redis puts their record under this agent's key: no instance serves it.
    const attacker = Identity.generate();
    const theirs = signRecord(attacker, { ...record({ seq: 99 }), agentId: attacker.id });
    const raw = await connectRedis(redis.url);
    try {
      await raw.command(['HSET', `${await prefixOf(instances[0])}rec:${me.id}`, 'rec', Buffer.from(theirs.record), 'sig', Buffer.from(theirs.signature)]);
    } finally {
      await raw.close();
    }
    const other = await wsClient();
    for (const r of instances) {
      expect(await failure(other.send(r.address, 'rdv.lookup', { agentId: me.id }))).toMatchObject({ code: 'NOT_FOUND' });
      expect(r.metrics.rejectedCount('stored-forged')).toBe(1);
    }
  });
});

/** The Redis prefix of an instance (its config). */
async function prefixOf(r: Rendezvous): Promise<string> {
  return r.config.redisPrefix;
}

async function reachableAgentAt(addresses: string[], any: Rendezvous, heartbeatMs: number) {
  return reachableAgent(any, { rendezvous: addresses, heartbeatMs });
}
