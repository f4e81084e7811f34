import { createAgent, Identity } from '@agentlink/core';
import { signRecord } from '@agentlink/nat';
import { webSocket } from '@agentlink/ws';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, rendezvous, wsClient } from './helpers.js';

afterEach(cleanup);

const AGENTS = Number(process.env.RENDEZVOUS_SCALE_AGENTS ?? 10_000);
const CONCURRENCY = 100;

describe('rendezvous at scale', () => {
  it(`registers ${AGENTS} agents, each over its own authenticated connection, and looks every one up`, { timeout: 300_000 }, async () => {
    // Every agent here connects from 127.0.0.1: the per-IP limits are lifted (a real fleet comes from many addresses).
    const r = await rendezvous({
      registrationsPerSecondPerIp: 1e9,
      maxRegistrationsPerIp: 1e9,
      requestsPerSecondPerIp: 1e9,
      connectionsPerSecondPerIp: 1e9,
      maxConnectionsPerIp: 1e9,
      maxConnections: 1e9,
      // Records must outlive the run (10,000 registrations take ~130 s here, 76/s), or the lookups would find the
      // first ones expired: this test measures throughput, not expiry.
      maxRecordTtlMs: 600_000,
    });
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    const ids: string[] = [];
    const started = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < AGENTS) {
        next++;
        const identity = Identity.generate();
        const agent = await createAgent({ identity, channels: [webSocket()], idleTimeoutMs: 0, healthCheckIntervalMs: 0 });
        const record = { agentId: identity.id, candidates: [`quic://198.51.100.${next % 250}:${10_000 + (next % 50_000)}`], nat: 'cone' as const, portDelta: 0, seq: 1, expiresAt: Date.now() + 590_000 };
        await agent.send(r.address, 'rdv.register', signRecord(identity, record));
        ids.push(identity.id);
        await agent.close();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const registerMs = performance.now() - started;
    global.gc?.();
    const heapPerRecord = (process.memoryUsage().heapUsed - heapBefore) / AGENTS;

    const reader = await wsClient();
    const lookupStarted = performance.now();
    let found = 0;
    for (let i = 0; i < ids.length; i += 500) {
      const batch = ids.slice(i, i + 500);
      const records = await Promise.all(batch.map((agentId) => reader.send<{ record: Uint8Array }>(r.address, 'rdv.lookup', { agentId })));
      found += records.filter((x) => x.record.length > 0).length;
    }
    const lookupMs = performance.now() - lookupStarted;
    expect(found).toBe(AGENTS);
    expect(await r.registry.size()).toBe(AGENTS);
    console.log(
      `rendezvous scale: ${AGENTS} registrations in ${(registerMs / 1000).toFixed(1)} s (${Math.round(AGENTS / (registerMs / 1000))}/s, each a new TLS connection), ` +
        `${AGENTS} lookups in ${(lookupMs / 1000).toFixed(2)} s (${Math.round(AGENTS / (lookupMs / 1000))}/s), ` +
        `heap ~${(heapPerRecord / 1024).toFixed(2)} KiB per registration (test process, client side included)`,
    );
  });
});
