import { once } from 'node:events';
import { CallMetrics, type AgentError } from '@agentlink/core';
import { signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, reachableAgent, recordOf, rendezvous, udpListener, wsClient } from './helpers.js';

afterEach(cleanup);

describe('punch requests as an amplifier', () => {
  // Loopback stands for the internet here: every 127.0.0.0/8 address is a different host. The victim listens on
  // 127.0.0.1, the stranger connects from 127.0.0.3, and 127.0.0.2 is a third party the stranger wants flooded.
  it("a stranger's punch request makes the agent dial the stranger's address only, never a third party's", async () => {
    const r = await rendezvous();
    const victim = await reachableAgent(r, { punchTimeoutMs: 10_000 });
    const thirdParty = await udpListener('127.0.0.2');
    const own = await udpListener('127.0.0.3');
    try {
      const stranger = await wsClient('127.0.0.3');
      // Sixteen candidates at the third party (the most a record holds), then one at the stranger's own address,
      // and a symmetric NAT whose predicted ports point at the third party too.
      const candidates = [...Array.from({ length: 15 }, () => `quic://127.0.0.2:${thirdParty.port}`), `quic://127.0.0.3:${own.port}`];
      const record = recordOf(stranger.identity, { candidates, nat: 'symmetric', portDelta: 0 });
      await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, record));
      await stranger.send(r.address, 'rdv.punch', { target: victim.agent.id });
      // The agent dials every target at once, in the record's order: by the time the stranger's own address hears
      // from it, anything sent to the third party has been delivered on loopback too.
      await once(own.socket, 'message');
      await new Promise((resolve) => setImmediate(resolve));
      expect(own.datagrams[0]).toBeGreaterThanOrEqual(1200); // a QUIC Initial
      expect(thirdParty.datagrams).toEqual([]);
    } finally {
      thirdParty.socket.close();
      own.socket.close();
    }
  });
});

describe('punch requests towards one agent', () => {
  it('are forwarded at punchesPerSecondPerTarget, however many addresses ask', async () => {
    // Each address's share of the target's rate lifted above its 40 asks: this is about the rate in all.
    const r = await rendezvous({ punchesPerSecondPerTarget: 5, punchesPerSecondPerTargetPerIp: 40 });
    const served = new CallMetrics();
    const victim = await reachableAgent(r, {}, { inboundInterceptors: [served.inboundInterceptor] });
    // Three addresses, each well within its own request rate (200/s, burst 400), 40 punches each at once.
    const started = performance.now();
    const outcomes = await Promise.all(
      ['127.0.0.3', '127.0.0.4', '127.0.0.5'].map(async (ip) => {
        const stranger = await wsClient(ip);
        await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity, { candidates: [`quic://${ip}:9`] })));
        return Promise.all(Array.from({ length: 40 }, () => stranger.send(r.address, 'rdv.punch', { target: victim.agent.id }).then(() => 'ok', (e: AgentError) => e.code)));
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const forwarded = outcomes.flat().filter((x) => x === 'ok').length;
    // The burst (2 × 5), plus what refilled while the requests arrived; before, all 120 reached the agent.
    expect(forwarded).toBeGreaterThanOrEqual(10);
    expect(forwarded).toBeLessThanOrEqual(10 + Math.ceil(5 * seconds));
    expect(outcomes.flat().filter((x) => x === 'RESOURCE_EXHAUSTED')).toHaveLength(120 - forwarded);
    expect(served.snapshot().served.methods['nat.punch']?.count).toBe(forwarded);
    expect(r.metrics.rejectedCount('target-rate')).toBe(120 - forwarded);
  });
});

describe('punch requests towards one agent from one address', () => {
  it("take at most punchesPerSecondPerTargetPerIp of the agent's rate: one address cannot use it all up", async () => {
    const r = await rendezvous({ punchesPerSecondPerTarget: 5, punchesPerSecondPerTargetPerIp: 1 });
    const served = new CallMetrics();
    const victim = await reachableAgent(r, {}, { inboundInterceptors: [served.inboundInterceptor] });
    const honest = await wsClient('127.0.0.1');
    await honest.send(r.address, 'rdv.register', signRecord(honest.identity, recordOf(honest.identity, { candidates: ['quic://127.0.0.1:9'] })));
    const stranger = await wsClient('127.0.0.3');
    await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity, { candidates: ['quic://127.0.0.3:9'] })));
    const started = performance.now();
    const outcomes = await Promise.all(Array.from({ length: 40 }, () => stranger.send(r.address, 'rdv.punch', { target: victim.agent.id }).then(() => 'ok', (e: AgentError) => e.code)));
    const seconds = (performance.now() - started) / 1000;
    const forwarded = outcomes.filter((x) => x === 'ok').length;
    // Its share's burst (2 × 1) and what refilled while they arrived; before 2026-11-24 it took the agent's whole
    // burst (10), and an honest peer's punch right after was refused.
    expect(forwarded).toBeGreaterThanOrEqual(2);
    expect(forwarded).toBeLessThanOrEqual(2 + Math.ceil(seconds));
    expect(r.metrics.rejectedCount('target-ip-rate')).toBe(40 - forwarded);
    expect(await honest.send(r.address, 'rdv.punch', { target: victim.agent.id }).then(() => 'ok', (e: AgentError) => e.code)).toBe('ok');
    expect(served.snapshot().served.methods['nat.punch']?.count).toBe(forwarded + 1);
  });
});
