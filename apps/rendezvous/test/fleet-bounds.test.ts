import { createSocket } from 'node:dgram';
import { type AgentError } from '@agentlink/core';
import { signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, reachableAgent, recordOf, rendezvous, wsClient } from './helpers.js';

afterEach(cleanup);

/** What a call ended with: 'ok', or the refusal. */
const outcome = (call: Promise<unknown>): Promise<'ok' | AgentError> => call.then(() => 'ok' as const, (error: AgentError) => error);

describe('a fleet behind one address meets the per-IP bounds', () => {
  it('a refusal by a per-IP bound names the bound, its value and the flag that raises it', async () => {
    const r = await rendezvous({ maxRegistrationsPerIp: 2, registrationsPerSecondPerIp: 1000 });
    const agents = [await wsClient(), await wsClient(), await wsClient()];
    const results = [];
    for (const a of agents) results.push(await outcome(a.send(r.address, 'rdv.register', signRecord(a.identity, recordOf(a.identity)))));
    expect(results.slice(0, 2)).toEqual(['ok', 'ok']);
    expect(results[2]).toMatchObject({
      code: 'RESOURCE_EXHAUSTED',
      message: expect.stringContaining("maxRegistrationsPerIp is 2; its operator raises it with --max-registrations-per-ip or RENDEZVOUS_MAX_REGISTRATIONS_PER_IP"),
    });

    // The rate (burst 2×): the fifth registration within the same instant is refused, saying which rate.
    const fast = await rendezvous({ registrationsPerSecondPerIp: 2 });
    const one = await wsClient();
    const rated = [];
    for (let seq = 1; seq <= 5; seq++) rated.push(await outcome(one.send(fast.address, 'rdv.register', signRecord(one.identity, recordOf(one.identity, { seq })))));
    expect(rated.filter((x) => x === 'ok').length).toBeLessThan(5);
    expect(rated.find((x) => x !== 'ok')).toMatchObject({
      code: 'RESOURCE_EXHAUSTED',
      message: expect.stringContaining('registrationsPerSecondPerIp is 2; its operator raises it with --registrations-per-second-per-ip'),
    });
  });

  it("a heartbeat whose STUN the per-IP rate drops keeps the NAT type and mapping learned before", async () => {
    const r = await rendezvous({ stunRequestsPerSecondPerIp: 1 });
    const { agent, nat } = await reachableAgent(r, { heartbeatMs: 30_000 });
    const first = (await r.registry.get(agent.id))!.record;
    expect(first.nat).toBe('none');
    const mapped = nat.nat!.mapped;
    expect(mapped?.host).toBe('127.0.0.1');
    const reported: AgentError[] = [];
    nat.on('error', (error) => reported.push(error));

    // Another process behind the same address (the whole fleet's STUN shares one allowance) keeps the rate used up.
    const neighbour = createSocket('udp4');
    await new Promise<void>((resolve) => neighbour.bind(0, '127.0.0.1', resolve));
    const junk = Buffer.alloc(20);
    let flooding = true;
    const flood = (async () => {
      while (flooding) {
        for (const port of r.stunPorts) neighbour.send(junk, port, '127.0.0.1');
        await new Promise((resolve) => setTimeout(resolve, 1)); // ~1,000 a second: every token the bucket refills
      }
    })();
    try {
      const again = await nat.register(); // the heartbeat's work, now
      expect(r.metrics.stunCount('rate')).toBeGreaterThan(0);
      expect(again.seq).toBeGreaterThan(first.seq);
      // Before the fix: nat 'unknown' and no public mapping, until a heartbeat got answers again.
      expect(again.nat).toBe('none');
      expect((await r.registry.get(agent.id))!.record).toMatchObject({ seq: again.seq, nat: 'none' });
      expect(nat.nat?.mapped).toEqual(mapped);
      expect(reported.map((e) => e.code)).toContain('UNAVAILABLE');
      expect(reported.find((e) => e.code === 'UNAVAILABLE')?.message).toMatch(/^no STUN answer from the rendezvous .*: registering with the NAT type and mapping learned before$/);
    } finally {
      flooding = false;
      await flood;
      neighbour.close();
    }
  });
});
