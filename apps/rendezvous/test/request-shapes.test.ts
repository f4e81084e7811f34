import { AgentError } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, rendezvous, wsClient } from './helpers.js';

afterEach(cleanup);

describe('requests of the wrong shape', () => {
  it('rdv.lookup, rdv.route, rdv.punch and rdv.relay naming no AgentId are refused with INVALID_ARGUMENT and counted', async () => {
    const r = await rendezvous();
    const client = await wsClient();
    const codeOf = (attempt: Promise<unknown>) => attempt.then(() => 'answered', (error: AgentError) => error.code);
    const bodies = [undefined, null, 7, 'x', { agentId: 5, target: 5 }, { agentId: { toString: 1 }, target: { toString: 1 } }, { agentId: 'a'.repeat(30_000), target: 'a'.repeat(30_000) }];
    const codes: string[] = [];
    for (const body of bodies) {
      for (const method of ['rdv.lookup', 'rdv.route', 'rdv.punch']) codes.push(await codeOf(client.send(r.address, method, body)));
      codes.push(await codeOf(client.openTunnel(r.address, 'rdv.relay', body)));
    }
    // Before: a body that was no map was a TypeError (HANDLER_ERROR, the engine's message), an object as the id too,
    // and a number or a 30,000-character string was looked up in the store (NOT_FOUND).
    expect(codes).toEqual(Array.from({ length: bodies.length * 4 }, () => 'INVALID_ARGUMENT'));
    expect(r.metrics.rejectedCount('invalid')).toBe(bodies.length * 4);
  });

  it('rdv.info is within the per-IP request rate, as lookups are', async () => {
    const r = await rendezvous({ requestsPerSecondPerIp: 1 });
    const client = await wsClient();
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, () => client.send(r.address, 'rdv.info').then(() => 'answered', (error: AgentError) => error.code)),
    );
    // Before: all 30 answered (with a cluster, each one a read of the instance list from Redis).
    // The burst is 2; more answered only as the bucket refills, one a second (30 asked at once).
    expect(outcomes.filter((o) => o === 'answered').length).toBeLessThan(10);
    expect(outcomes.filter((o) => o !== 'answered').every((o) => o === 'RESOURCE_EXHAUSTED')).toBe(true);
    expect(r.metrics.rejectedCount('rate')).toBe(outcomes.filter((o) => o === 'RESOURCE_EXHAUSTED').length);
  });
});
