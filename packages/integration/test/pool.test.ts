import { AgentError, Identity, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAgents, dialOnlyAgent, gate, sleep, wsAgent } from './helpers.js';

afterEach(closeAgents);

/** A server whose `work` handler takes `ms` and returns its input. */
async function worker(ms: number, options: Parameters<typeof wsAgent>[0] = {}): Promise<Agent> {
  const server = await wsAgent(options);
  server.handle('work', async (n: number) => {
    await sleep(ms);
    return n;
  });
  return server;
}

describe('pool over real WebSocket channels', () => {
  it('1,000 concurrent calls to 50 peers all complete on a bounded number of channels', async () => {
    const servers = await Promise.all(Array.from({ length: 50 }, () => worker(3)));
    const client = await dialOnlyAgent({ maxCallsPerChannel: 4, maxChannelsPerPeer: 2 });
    let peakChannels = 0;
    const sampler = setInterval(() => (peakChannels = Math.max(peakChannels, client.channels().length)), 2);
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => client.send<number>(servers[i % 50]!.addresses[0]!, 'work', i)),
    );
    clearInterval(sampler);
    expect(results).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    // 20 calls per peer against 4 slots per channel: each peer got its second channel, never a third.
    expect(peakChannels).toBeLessThanOrEqual(100);
    const perPeer = new Map<string, number>();
    for (const channel of client.channels()) perPeer.set(channel.peer, (perPeer.get(channel.peer) ?? 0) + 1);
    expect(perPeer.size).toBe(50);
    expect(Math.max(...perPeer.values())).toBeLessThanOrEqual(2);
    expect(client.stats().pendingCalls).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
  });

  it('critical calls queued behind 2,000 low ones complete first, and every low one completes', async () => {
    const server = await worker(1);
    const client = await dialOnlyAgent({ maxCallsPerChannel: 4, maxChannelsPerPeer: 1 });
    const address = server.addresses[0]!;
    await client.ping(address);
    const order: string[] = [];
    const low = Array.from({ length: 2000 }, (_, i) => client.send(address, 'work', i, { priority: 'low' }).then(() => order.push('low')));
    expect(client.stats().pendingCalls.low).toBeGreaterThan(1900);
    const critical = Array.from({ length: 20 }, (_, i) => client.send(address, 'work', i, { priority: 'critical' }).then(() => order.push('critical')));
    await Promise.all([...low, ...critical]);
    expect(order.filter((o) => o === 'low')).toHaveLength(2000);
    // Ahead of the last critical call: the 4 low calls already running, and at most 1 low per 64 critical turns.
    const lastCritical = order.lastIndexOf('critical');
    expect(lastCritical).toBeLessThan(20 + 4 + 2);
  });

  it('low is never starved: under a flood of critical calls low ones keep completing', async () => {
    const server = await worker(0);
    const client = await dialOnlyAgent({ maxCallsPerChannel: 2, maxChannelsPerPeer: 1 });
    const address = server.addresses[0]!;
    await client.ping(address);
    const order: string[] = [];
    const all = [
      ...Array.from({ length: 2000 }, () => client.send(address, 'work', 0, { priority: 'critical' }).then(() => order.push('critical'))),
      ...Array.from({ length: 100 }, () => client.send(address, 'work', 0, { priority: 'low' }).then(() => order.push('low'))),
    ];
    await Promise.all(all);
    const lowBeforeLastCritical = order.slice(0, order.lastIndexOf('critical')).filter((o) => o === 'low').length;
    // The weights give low 1 turn in 65 while critical has work: ~30 of 2,000 critical turns.
    expect(lowBeforeLastCritical).toBeGreaterThanOrEqual(20);
  });

  it('a full queue rejects at once with RESOURCE_EXHAUSTED; the queued calls still complete', async () => {
    const server = await wsAgent();
    const held = gate();
    server.handle('held', async (n: number) => {
      await held.wait;
      return n;
    });
    const client = await dialOnlyAgent({ maxCallsPerChannel: 1, maxChannelsPerPeer: 1, maxPendingCalls: 10 });
    const address = server.addresses[0]!;
    await client.ping(address);
    const accepted = Array.from({ length: 11 }, (_, i) => client.send(address, 'held', i));
    await sleep(20);
    const started = performance.now();
    const rejected = await client.send(address, 'held', 99).catch((e: AgentError) => e);
    expect(performance.now() - started).toBeLessThan(50);
    expect(rejected).toBeInstanceOf(AgentError);
    expect((rejected as AgentError).code).toBe('RESOURCE_EXHAUSTED');
    held.open();
    expect(await Promise.all(accepted)).toEqual(Array.from({ length: 11 }, (_, i) => i));
  });

  it('a queued call whose deadline passes leaves the queue with DEADLINE_EXCEEDED', async () => {
    const server = await wsAgent();
    const held = gate();
    server.handle('held', () => held.wait.then(() => 'done'));
    const client = await dialOnlyAgent({ maxCallsPerChannel: 1, maxChannelsPerPeer: 1 });
    const address = server.addresses[0]!;
    const first = client.send(address, 'held');
    await expect(client.send(address, 'held', null, { timeoutMs: 50 })).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    expect(client.stats().pendingCalls.normal).toBe(0);
    held.open();
    expect(await first).toBe('done');
  });

  it('closes idle channels and dials again for the next call', async () => {
    const server = await worker(0);
    const client = await dialOnlyAgent({ idleTimeoutMs: 150 });
    const address = server.addresses[0]!;
    await client.send(address, 'work', 1);
    const [channel] = client.channels();
    await expect(channel!.closed).resolves.toMatchObject({ code: 'CLOSED' });
    expect(client.channels()).toHaveLength(0);
    expect(await client.send(address, 'work', 2)).toBe(2);
  });

  it('pings channels for health and records their round-trip time', async () => {
    const server = await worker(0);
    const client = await dialOnlyAgent({ healthCheckIntervalMs: 50 });
    await client.send(server.addresses[0]!, 'work', 1);
    await sleep(150);
    const [stats] = client.stats().channels;
    expect(stats?.kind).toBe('ws');
    expect(stats?.rttMs).toBeGreaterThan(0);
    expect(stats?.rttMs).toBeLessThan(100);
  });

  it('fails fast: a method with no handler, or a peer nobody listens for', async () => {
    const server = await worker(0);
    const client = await dialOnlyAgent();
    let started = performance.now();
    await expect(client.send(server.addresses[0]!, 'nope')).rejects.toMatchObject({ code: 'NO_HANDLER', remote: true });
    expect(performance.now() - started).toBeLessThan(1000);
    const closedPort = `${Identity.generate().id}@wss://127.0.0.1:1/agentlink`;
    started = performance.now();
    await expect(client.send(closedPort, 'work', 1)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
