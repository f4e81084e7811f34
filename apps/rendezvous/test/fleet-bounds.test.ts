import { createSocket } from 'node:dgram';
import { type AgentError } from '@agentlink/core';
import { DEFAULT_HEARTBEAT_MS, signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../src/config.js';
import type { Logger } from '../src/log.js';
import { MAX_REFUSAL_LINES_PER_MINUTE, REFUSAL_LOG_EVERY_MS, RefusalLog } from '../src/refusal-log.js';
import { cleanup, reachableAgent, recordOf, rendezvous, wsClient } from './helpers.js';

afterEach(cleanup);

/** What a call ended with: 'ok', or the refusal. */
const outcome = (call: Promise<unknown>): Promise<'ok' | AgentError> => call.then(() => 'ok' as const, (error: AgentError) => error);

describe('a fleet behind one address meets the per-IP bounds', () => {
  it('the default rates let the agents one address may register heartbeat at the default interval', () => {
    // Each agent registers (and asks both STUN ports) once a heartbeat. Until 2026-11-25 the registration rate (20/s)
    // held 300 such agents and the STUN rate (50/s) 375, while an address could register 1,000: a fleet of 1,000
    // behind one NAT had its heartbeats refused and its records expired (514 of 1,000 registered after two minutes).
    const registrationsPerSecond = DEFAULT_CONFIG.maxRegistrationsPerIp / (DEFAULT_HEARTBEAT_MS / 1000);
    expect(DEFAULT_CONFIG.registrationsPerSecondPerIp).toBeGreaterThanOrEqual(registrationsPerSecond);
    expect(DEFAULT_CONFIG.stunRequestsPerSecondPerIp).toBeGreaterThanOrEqual(2 * registrationsPerSecond);
    // rdv.info is asked once a registration, within the request rate.
    expect(DEFAULT_CONFIG.requestsPerSecondPerIp).toBeGreaterThanOrEqual(registrationsPerSecond);
  });

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

  it('a mapping kept through unanswered STUN is kept for a bounded number of registrations in a row, not for good', async () => {
    const r = await rendezvous({ stunRequestsPerSecondPerIp: 1 });
    const { agent, nat } = await reachableAgent(r, { heartbeatMs: 30_000 });
    expect((await r.registry.get(agent.id))!.record.nat).toBe('none');
    const reported: AgentError[] = [];
    nat.on('error', (error) => reported.push(error));
    const neighbour = createSocket('udp4');
    await new Promise<void>((resolve) => neighbour.bind(0, '127.0.0.1', resolve));
    const junk = Buffer.alloc(20);
    let flooding = true;
    const flood = (async () => {
      while (flooding) {
        for (const port of r.stunPorts) neighbour.send(junk, port, '127.0.0.1');
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    })();
    try {
      // STUN unanswered at every heartbeat from now on (as after a move to a network that drops it): the old
      // mapping is published MAX_UNANSWERED_KEPT (2) times, then no longer. Before: 'none' and the old mapping for
      // as long as the agent ran.
      const published = [];
      for (let i = 0; i < 3; i++) published.push(await nat.register());
      expect(r.metrics.stunCount('rate')).toBeGreaterThan(0);
      expect(published.map((record) => record.nat)).toEqual(['none', 'none', 'unknown']);
      expect((await r.registry.get(agent.id))!.record).toMatchObject({ seq: published[2]!.seq, nat: 'unknown' });
      expect(nat.nat).toMatchObject({ type: 'unknown', mapped: undefined });
      expect(reported.at(-1)?.message).toMatch(/^no STUN answer from the rendezvous .* 3 times in a row: registering as unknown, without the mapping learned before$/);
    } finally {
      flooding = false;
      await flood;
      neighbour.close();
    }
  });

  it('the operator reads refusals by a bound in the log: which bound, which client, how many, at most a line a minute', async () => {
    const lines: Array<{ level: string; message: string; fields: Record<string, unknown> | undefined }> = [];
    const log: Logger = (level, message, fields) => lines.push({ level, message, fields });
    const r = await rendezvous({ registrationsPerSecondPerIp: 1, log });
    const one = await wsClient();
    const results = [];
    for (let seq = 1; seq <= 6; seq++) results.push(await outcome(one.send(r.address, 'rdv.register', signRecord(one.identity, recordOf(one.identity, { seq })))));
    const refusedCalls = results.filter((x) => x !== 'ok').length;
    expect(refusedCalls).toBeGreaterThanOrEqual(3); // burst 2, then 1 a second
    // Before: nothing in the log, only rendezvous_rejected_total{reason="rate"}.
    const warnings = lines.filter((l) => l.message === 'refused');
    expect(warnings).toHaveLength(1); // the others within the minute are counted for the next line
    expect(warnings[0]).toMatchObject({
      level: 'warn',
      fields: { reason: 'registrationsPerSecondPerIp', client: '127.0.0.1', refused: 1, error: expect.stringContaining('--registrations-per-second-per-ip') },
    });
  });

  it('refusal lines: a minute apart per bound and client, each counting those not logged since; listener refusals as counts', () => {
    const lines: Array<Record<string, unknown> | undefined> = [];
    let now = 1_000_000;
    const refusals = new RefusalLog((_level, _message, fields) => lines.push(fields), () => now);
    refusals.refused('registrationsPerSecondPerIp', '192.0.2.1', 'too many');
    refusals.refused('registrationsPerSecondPerIp', '192.0.2.1', 'too many');
    refusals.refused('registrationsPerSecondPerIp', '192.0.2.2', 'too many'); // another client: its own line
    refusals.refused('maxRegistrationsPerIp', '192.0.2.1', 'too many'); // another bound: its own line
    expect(lines.map((l) => [l?.reason, l?.client, l?.refused])).toEqual([
      ['registrationsPerSecondPerIp', '192.0.2.1', 1],
      ['registrationsPerSecondPerIp', '192.0.2.2', 1],
      ['maxRegistrationsPerIp', '192.0.2.1', 1],
    ]);
    now += REFUSAL_LOG_EVERY_MS - 1;
    refusals.refused('registrationsPerSecondPerIp', '192.0.2.1', 'too many');
    expect(lines).toHaveLength(3);
    now += 1;
    refusals.refused('registrationsPerSecondPerIp', '192.0.2.1', 'too many');
    expect(lines.at(-1)).toMatchObject({ reason: 'registrationsPerSecondPerIp', client: '192.0.2.1', refused: 3 });

    lines.length = 0;
    refusals.listenerRefusals({ 'connection:ip-rate': 5, 'stream:budget': 9 });
    refusals.listenerRefusals({ 'connection:ip-rate': 5, 'handshake:handshake-timeout': 2 });
    refusals.listenerRefusals({ 'connection:ip-rate': 12, 'handshake:handshake-timeout': 2 });
    expect(lines).toEqual([
      { reason: 'connection:ip-rate', refused: 5 },
      { reason: 'handshake:handshake-timeout', refused: 2 },
      { reason: 'connection:ip-rate', refused: 7 },
    ]);
  });
  it('refusal lines in all are bounded a minute, however many addresses are refused (an IPv6 /48 has 65,536 clients)', () => {
    const lines: Array<{ message: string; fields: Record<string, unknown> | undefined }> = [];
    let now = 1_000_000;
    const refusals = new RefusalLog((_level, message, fields) => lines.push({ message, fields }), () => now);
    // 20,000 clients (/64s of one /48), each refused twice in a round-robin within one minute. Before: clients
    // remembered were evicted before their turn came round again, and every refusal was a line (40,000 a minute).
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 20_000; i++) refusals.refused('requestsPerSecondPerIp', `2001:db8:1:${i.toString(16)}::/64`, 'too many');
    }
    expect(lines).toHaveLength(MAX_REFUSAL_LINES_PER_MINUTE);
    expect(new Set(lines.map((l) => l.fields?.client)).size).toBe(MAX_REFUSAL_LINES_PER_MINUTE); // one per client
    // The next minute's first line says how many refusals went unlogged (those of the clients that had their line
    // are counted in their next one).
    now += REFUSAL_LOG_EVERY_MS;
    lines.length = 0;
    refusals.refused('requestsPerSecondPerIp', '192.0.2.1', 'too many');
    expect(lines).toEqual([
      { message: 'refusals not logged', fields: { refused: 2 * (20_000 - MAX_REFUSAL_LINES_PER_MINUTE) } },
      { message: 'refused', fields: { reason: 'requestsPerSecondPerIp', client: '192.0.2.1', refused: 1, error: 'too many' } },
    ]);
  });
});
