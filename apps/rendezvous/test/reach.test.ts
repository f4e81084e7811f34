import { afterEach, describe, expect, it } from 'vitest';
import { Identity } from '@agentlink/core';
import { RendezvousClient, signRecord } from '@agentlink/nat';
import { cleanup, reachableAgent, recordOf, rendezvous, sleep, wsClient } from './helpers.js';

afterEach(cleanup);

describe('reach on loopback (no NAT)', () => {
  it('registers by STUN from the QUIC socket, finds a peer by its bare AgentId, and calls it directly', async () => {
    const r = await rendezvous();
    const b = await reachableAgent(r);
    b.agent.handle('echo', (x: unknown) => x);
    const a = await reachableAgent(r);
    expect(a.nat.nat?.type).toBe('none');
    expect((await r.registry.get(b.agent.id))?.record.candidates[0]).toMatch(/^quic:\/\/127\.0\.0\.1:\d+$/);
    const paths: string[] = [];
    a.nat.on('path', (e) => paths.push(e.path));
    expect(await a.agent.send(b.agent.id, 'echo', 'hi')).toBe('hi');
    expect(paths).toEqual(['direct']);
    const path = await a.agent.pathTo(b.agent.id);
    expect(path).toMatchObject({ path: 'direct', kind: 'quic' });
    expect(path.rttMs).toBeGreaterThan(0);
  });

  it('a punch coordinated by the rendezvous connects both sides on one QUIC channel', async () => {
    const r = await rendezvous();
    const b = await reachableAgent(r, { paths: ['punch'] });
    b.agent.handle('echo', (x: unknown) => x);
    const a = await reachableAgent(r, { paths: ['punch'] });
    expect(await a.agent.send(b.agent.id, 'echo', 'punched')).toBe('punched');
    expect((await a.agent.pathTo(b.agent.id)).path).toBe('punched');
    expect(r.metrics.punches).toBe(1);
  });

  it('relays with TLS end to end: the relay forwards only ciphertext', async () => {
    const relayed: Buffer[] = [];
    const r = await rendezvous({ relayTap: (chunk) => relayed.push(Buffer.from(chunk)) });
    const b = await reachableAgent(r, { paths: ['relay'] });
    const secret = 'the-plaintext-marker-0123456789';
    b.agent.handle('echo', (x: unknown) => x);
    b.agent.handleStream('tokens', async function* (n: number) {
      for (let i = 0; i < n; i++) yield `${secret}-${i}`;
    });
    const a = await reachableAgent(r, { paths: ['relay'] });
    expect(await a.agent.send(b.agent.id, 'echo', secret)).toBe(secret);
    const tokens: string[] = [];
    for await (const token of a.agent.stream<string>(b.agent.id, 'tokens', 50)) tokens.push(token);
    expect(tokens).toHaveLength(50);
    const path = await a.agent.pathTo(b.agent.id);
    expect(path).toMatchObject({ path: 'relay', kind: 'relay' });
    const all = Buffer.concat(relayed);
    expect(all.length).toBeGreaterThan(1000);
    expect(all.includes(Buffer.from(secret))).toBe(false);
    expect(all.includes(Buffer.from('echo'))).toBe(false);
    expect(relayed.some((c) => c[0] === 0x17 && c[1] === 0x03 && c[2] === 0x03)).toBe(true); // TLS application data records
  });

  it('survives a rendezvous restart: heartbeats fail quietly, then register again', async () => {
    const identity = Identity.generate();
    const first = await rendezvous({ identity });
    const port = Number(new URL(first.address.split('@')[1]!).port);
    const { agent, nat } = await reachableAgent(first, { heartbeatMs: 150 });
    const errors: string[] = [];
    let heartbeatFailed!: () => void;
    const failed = new Promise<void>((resolve) => (heartbeatFailed = resolve));
    nat.on('error', (e) => {
      errors.push(e.code);
      heartbeatFailed();
    });
    await first.close();
    await failed; // a heartbeat failed while it is down
    const second = await rendezvous({ identity, port });
    while (!(await second.registry.get(agent.id))) await sleep(50); // the next heartbeats register again (test timeout bounds it)
    expect((await second.registry.get(agent.id))?.record.agentId).toBe(agent.id);
    expect(errors.length).toBeGreaterThan(0);
  });

  it('fails over between rendezvous: registers with the first, moves to the next when it fails, and lookups try the others', async () => {
    const [first, second] = [await rendezvous(), await rendezvous()];
    const moving = await reachableAgent(first, { rendezvous: [first.address, second.address], heartbeatMs: 300 });
    moving.agent.handle('echo', (x: unknown) => x);
    expect(moving.nat.registeredWith).toBe(first.agent.id);
    expect(await second.registry.get(moving.agent.id)).toBeUndefined();
    await first.close();
    for (let i = 0; i < 100 && moving.nat.registeredWith !== second.agent.id; i++) await sleep(25);
    expect((await second.registry.get(moving.agent.id))?.record.agentId).toBe(moving.agent.id);
    expect(moving.nat.registeredWith).toBe(second.agent.id);
    // A caller configured with the dead one first finds the agent at the second.
    const caller = await reachableAgent(second, { rendezvous: [first.address, second.address] });
    expect(await caller.agent.send(moving.agent.id, 'echo', 'found')).toBe('found');
  });

  it('when the rendezvous in use fails, tries the others in a random order: the agents of a failed instance spread over them', async () => {
    const [first, second, third] = [await rendezvous(), await rendezvous(), await rendezvous()];
    await first.close();
    const agent = await wsClient();
    let seq = 0;
    const movedTo = (random: number) =>
      new RendezvousClient(agent, [first.address, second.address, third.address], () => undefined, () => random).publishWith(async () =>
        signRecord(agent.identity, recordOf(agent.identity, { seq: ++seq })),
      );
    // Before 2026-11-24 every agent of the failed instance moved to the next one listed (second), and after a
    // rolling restart all of them sat on one instance.
    expect(await movedTo(0)).toBe(third.agent.id);
    expect(await movedTo(0.99)).toBe(second.agent.id);
  });

  it('refuses a rendezvous option that is neither an address nor a non-empty list', async () => {
    const r = await rendezvous();
    await expect(reachableAgent(r, { rendezvous: [] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
