import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Identity, type AgentError } from '@agentlink/core';
import { signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, failure, recordOf, rendezvous, sleep, wsClient } from './helpers.js';

afterEach(cleanup);

describe('rendezvous registry', () => {
  it('accepts a signed record from its own agent and serves it by AgentId', async () => {
    const r = await rendezvous();
    const client = await wsClient();
    await client.send(r.address, 'rdv.register', signRecord(client.identity, recordOf(client.identity)));
    const other = await wsClient();
    const signed = await other.send<{ record: Uint8Array }>(r.address, 'rdv.lookup', { agentId: client.id });
    expect(Buffer.from(signed.record)).toEqual(Buffer.from(signRecord(client.identity, recordOf(client.identity, { expiresAt: (await r.registry.get(client.id))!.record.expiresAt })).record));
    const missing = await failure(other.send(r.address, 'rdv.lookup', { agentId: Identity.generate().id }));
    expect(missing.code).toBe('NOT_FOUND');
  });

  it('rejects forged, foreign, replayed, expired, over-long and oversize records with clear errors', async () => {
    const r = await rendezvous();
    const client = await wsClient();
    const me = client.identity;
    const stranger = Identity.generate();

    const tampered = signRecord(me, recordOf(me));
    tampered.record = Buffer.from(tampered.record);
    tampered.record[tampered.record.length - 3]! ^= 1;
    expect(await failure(client.send(r.address, 'rdv.register', tampered))).toMatchObject({ code: 'UNAUTHENTICATED' });

    const forgedSignature = { record: signRecord(me, recordOf(me)).record, signature: signRecord(stranger, recordOf(stranger)).signature };
    expect(await failure(client.send(r.address, 'rdv.register', forgedSignature))).toMatchObject({ code: 'UNAUTHENTICATED' });

    const someoneElses = signRecord(stranger, recordOf(stranger));
    expect(await failure(client.send(r.address, 'rdv.register', someoneElses))).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/own record/) });

    await client.send(r.address, 'rdv.register', signRecord(me, recordOf(me, { seq: 10 })));
    const replay = await failure(client.send(r.address, 'rdv.register', signRecord(me, recordOf(me, { seq: 10 }))));
    expect(replay).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/replayed/) });
    expect(await failure(client.send(r.address, 'rdv.register', signRecord(me, recordOf(me, { seq: 9 }))))).toMatchObject({ code: 'INVALID_ARGUMENT' });

    const expired = signRecord(me, recordOf(me, { seq: 11, expiresAt: Date.now() - 1 }));
    expect(await failure(client.send(r.address, 'rdv.register', expired))).toMatchObject({ code: 'DEADLINE_EXCEEDED' });

    const tooLong = signRecord(me, recordOf(me, { seq: 12, expiresAt: Date.now() + 3_600_000 }));
    expect(await failure(client.send(r.address, 'rdv.register', tooLong))).toMatchObject({ code: 'INVALID_ARGUMENT' });

    const oversize = signRecord(me, recordOf(me, { seq: 13, candidates: Array.from({ length: 16 }, (_, i) => `quic://${'x'.repeat(200)}${i}:1`) }));
    expect(await failure(client.send(r.address, 'rdv.register', oversize))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/exceeds/) });

    const garbage = await failure(client.send(r.address, 'rdv.register', { record: Buffer.from('not msgpack at all \xc1'), signature: Buffer.alloc(64) }));
    expect(garbage.code).toBe('INVALID_ARGUMENT');

    // The valid record is still the one served.
    expect((await r.registry.get(me.id))?.record.seq).toBe(10);
    expect(r.metrics.rejectedCount('forged')).toBe(3);
    expect(r.metrics.rejectedCount('replayed')).toBe(2);
  });

  it('a flood from one IP is rate-limited while agents elsewhere keep working', async () => {
    const r = await rendezvous({ registrationsPerSecondPerIp: 20 });
    const flooder = await wsClient('127.0.0.2');
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        flooder.send(r.address, 'rdv.register', signRecord(flooder.identity, recordOf(flooder.identity, { seq: i + 1 }))).then(
          () => 'ok',
          (e: AgentError) => e.code,
        ),
      ),
    );
    const limited = results.filter((x) => x === 'RESOURCE_EXHAUSTED').length;
    expect(limited).toBeGreaterThan(200);
    const honest = await wsClient('127.0.0.1');
    await honest.send(r.address, 'rdv.register', signRecord(honest.identity, recordOf(honest.identity)));
    expect(await r.registry.get(honest.id)).toBeDefined();
    expect(r.metrics.rejectedCount('rate')).toBe(limited);
  });

  it('a connection flood from one IP is refused before TLS while other addresses connect', async () => {
    // 2 new connections per second per IP: a burst of 10 (5 s worth), then 2 a second.
    const r = await rendezvous({ connectionsPerSecondPerIp: 2 });
    const flood = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const agent = await wsClient('127.0.0.2');
        return agent.send(r.address, 'rdv.info').then(() => 'ok', (e: AgentError) => e.code);
      }),
    );
    // The burst, plus what refills while the flood (and each client's two quick re-dials) lasts.
    expect(flood.filter((x) => x === 'ok').length).toBeLessThanOrEqual(20);
    expect(flood.filter((x) => x === 'UNAVAILABLE').length).toBeGreaterThanOrEqual(40);
    const honest = await wsClient('127.0.0.1');
    expect(await honest.send(r.address, 'rdv.info')).toMatchObject({ relay: true });
    expect(r.agent.stats().refusals['connection:ip-rate']).toBeGreaterThanOrEqual(40);
  });

  it('kill -9 of an agent: its record expires on time, without heartbeats', async () => {
    const r = await rendezvous();
    const script = fileURLToPath(new URL('./registering-agent.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script, r.address, '300'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    const { id } = JSON.parse(line.toString()) as { id: string };
    while (((await r.registry.get(id as never))?.record.seq ?? 0) === 0) await sleep(50); // a heartbeat renewed it
    const before = (await r.registry.get(id as never))!.record;
    expect(before.seq).toBeGreaterThan(0);
    child.kill('SIGKILL');
    const watcher = await wsClient();
    for (;;) {
      const found = await watcher.send(r.address, 'rdv.lookup', { agentId: id }).then(() => true, () => false);
      if (!found) break;
      await sleep(50);
    }
    const last = await r.registry.get(id as never);
    expect(last).toBeUndefined();
    // Gone by its expiry (three heartbeats after the last renewal), not before it. How soon after is a matter
    // of the machine's load, not of correctness: no upper bound on the wall clock.
    expect(Date.now()).toBeGreaterThanOrEqual(before.expiresAt - 50);
  });

  it('serves /healthz and Prometheus /metrics', async () => {
    const r = await rendezvous();
    const client = await wsClient();
    await client.send(r.address, 'rdv.register', signRecord(client.identity, recordOf(client.identity)));
    const health = await fetch(`http://127.0.0.1:${r.httpPort}/healthz`);
    expect(await health.json()).toMatchObject({ ok: true, store: 'memory', registered: 1 });
    const metrics = await (await fetch(`http://127.0.0.1:${r.httpPort}/metrics`)).text();
    expect(metrics).toContain('rendezvous_registered_agents 1');
    expect(metrics).toContain('rendezvous_registrations_total{kind="new"} 1');
  });
});
