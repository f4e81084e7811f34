import diagnostics from 'node:diagnostics_channel';
import { AgentError, Identity, type Agent } from '@agentlink/core';
import { type Channel } from '@agentlink/core/transport';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  DIAL_ATTEMPTS,
  Tally,
  closeAgents,
  dialOnlyAgent,
  dialWatch,
  freePort,
  gate,
  ioTurn,
  settledWithoutIo,
  throughRefusedDials,
  useFakeClock,
  wsAgent,
} from './helpers.js';

afterEach(closeAgents);

/** A server whose `work` handler returns its input at once. */
async function worker(): Promise<Agent> {
  const server = await wsAgent();
  server.handle('work', (n: number) => n);
  return server;
}

/** Waits, one event-loop turn at a time, until `condition` holds (it is met by I/O, not by a timer). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await ioTurn();
}

describe('pool over real WebSocket channels', () => {
  it('1,000 concurrent calls to 50 peers all complete on a bounded number of channels', async () => {
    const held = gate();
    const running = new Tally();
    const servers = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const server = await wsAgent();
        server.handle('work', async (n: number) => {
          running.add();
          await held.wait;
          return n;
        });
        return server;
      }),
    );
    const client = await dialOnlyAgent({ maxCallsPerChannel: 4, maxChannelsPerPeer: 2 });
    // Every channel the client opens is counted as it opens: the peak is exact, not sampled.
    let peakChannels = 0;
    let peakPerPeer = 0;
    const onOpen = ({ channel }: { channel: Channel }) => {
      if (channel.initiator !== 'local') return;
      peakChannels = Math.max(peakChannels, client.channels().length);
      peakPerPeer = Math.max(peakPerPeer, client.channels(channel.peer).length);
    };
    diagnostics.subscribe('agentlink:channel:open', onOpen as (message: unknown) => void);
    try {
      const results = Promise.all(Array.from({ length: 1000 }, (_, i) => client.send<number>(servers[i % 50]!.addresses[0]!, 'work', i)));
      // 20 calls per peer against 4 slots per channel: each peer gets its second channel, never a third, and
      // with every handler held, 2 × 4 calls per peer run and the other 12 wait.
      await running.reached(400);
      expect(client.channels()).toHaveLength(100);
      expect(client.stats().pendingCalls).toEqual({ critical: 0, high: 0, normal: 600, low: 0 });
      held.open();
      expect(await results).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    } finally {
      diagnostics.unsubscribe('agentlink:channel:open', onOpen as (message: unknown) => void);
    }
    expect(running.count).toBe(1000);
    expect(peakChannels).toBe(100);
    expect(peakPerPeer).toBe(2);
    const perPeer = new Map<string, number>();
    for (const channel of client.channels()) perPeer.set(channel.peer, (perPeer.get(channel.peer) ?? 0) + 1);
    expect(perPeer.size).toBe(50);
    expect(Math.max(...perPeer.values())).toBe(2);
    expect(client.stats().pendingCalls).toEqual({ critical: 0, high: 0, normal: 0, low: 0 });
  });

  it('critical calls queued behind 2,000 low ones complete first, and every low one completes', async () => {
    const server = await worker();
    const client = await dialOnlyAgent({ maxCallsPerChannel: 4, maxChannelsPerPeer: 1 });
    const address = server.addresses[0]!;
    await client.ping(address);
    const order: string[] = [];
    const low = Array.from({ length: 2000 }, (_, i) => client.send(address, 'work', i, { priority: 'low' }).then(() => order.push('low')));
    // 4 take the channel's slots at once; the rest queue.
    expect(client.stats().pendingCalls.low).toBe(2000 - 4);
    const critical = Array.from({ length: 20 }, (_, i) => client.send(address, 'work', i, { priority: 'critical' }).then(() => order.push('critical')));
    expect(client.stats().pendingCalls.critical).toBe(20);
    await Promise.all([...low, ...critical]);
    expect(order.filter((o) => o === 'low')).toHaveLength(2000);
    // Ahead of the last critical call: the 4 low calls already running, and at most 1 low per 64 critical turns.
    const lastCritical = order.lastIndexOf('critical');
    expect(lastCritical).toBeLessThan(20 + 4 + 2);
  });

  it('low is never starved: under a flood of critical calls low ones keep completing', async () => {
    const server = await worker();
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
    const running = new Tally();
    server.handle('held', async (n: number) => {
      running.add();
      await held.wait;
      return n;
    });
    const client = await dialOnlyAgent({ maxCallsPerChannel: 1, maxChannelsPerPeer: 1, maxPendingCalls: 10 });
    const address = server.addresses[0]!;
    await client.ping(address);
    const accepted = Array.from({ length: 11 }, (_, i) => client.send(address, 'held', i));
    await running.reached(1); // one call holds the only slot, ten wait: the queue is full
    expect(client.stats().pendingCalls.normal).toBe(10);
    // At once: rejected before any I/O or timer could have happened.
    const rejected = await settledWithoutIo(client.send(address, 'held', 99));
    expect(rejected.state).toBe('rejected');
    const error = (rejected as { reason: unknown }).reason;
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: 'RESOURCE_EXHAUSTED', message: expect.stringContaining('maxPendingCalls 10') });
    expect(running.count).toBe(1);
    held.open();
    expect(await Promise.all(accepted)).toEqual(Array.from({ length: 11 }, (_, i) => i));
    expect(running.count).toBe(11);
  });

  it('a queued call whose deadline passes leaves the queue with DEADLINE_EXCEEDED', async () => {
    useFakeClock();
    const server = await wsAgent();
    const held = gate();
    const running = new Tally();
    server.handle('held', async () => {
      running.add();
      await held.wait;
      return 'done';
    });
    const client = await dialOnlyAgent({ maxCallsPerChannel: 1, maxChannelsPerPeer: 1 });
    const address = server.addresses[0]!;
    const first = client.send(address, 'held');
    const queued = client.send(address, 'held', null, { timeoutMs: 50 }).catch((e: AgentError) => e);
    await running.reached(1);
    expect(client.stats().pendingCalls.normal).toBe(1);
    await vi.advanceTimersByTimeAsync(49);
    expect(await settledWithoutIo(queued)).toEqual({ state: 'pending' });
    await vi.advanceTimersByTimeAsync(1); // its deadline, exactly
    expect(await settledWithoutIo(queued)).toMatchObject({ state: 'fulfilled', value: { code: 'DEADLINE_EXCEEDED' } });
    expect(client.stats().pendingCalls.normal).toBe(0);
    held.open();
    expect(await first).toBe('done');
    expect(running.count).toBe(1); // the expired call never reached the server
  });

  it('closes idle channels and dials again for the next call', async () => {
    useFakeClock();
    const server = await worker();
    const dials = dialWatch();
    const client = await dialOnlyAgent({ idleTimeoutMs: 160 }, dials);
    const address = server.addresses[0]!;
    await client.send(address, 'work', 1);
    const [channel] = client.channels();
    // Idle from the first check (every 40 ms) that finds it unused, closed at the first check 160 ms after that.
    await vi.advanceTimersByTimeAsync(160);
    expect(client.channels()).toEqual([channel]);
    await vi.advanceTimersByTimeAsync(40);
    expect(client.channels()).toEqual([]);
    await expect(channel!.closed).resolves.toMatchObject({ code: 'CLOSED', message: expect.stringContaining('idle for 160 ms') });
    expect(await client.send(address, 'work', 2)).toBe(2);
    expect(dials.opened.count).toBe(2);
  });

  it('at maxChannels, closes the least recently used channel even when every use fell in one clock millisecond', async () => {
    useFakeClock(['Date']); // the clock stands still: only the order of use can tell the channels apart
    const [a, b, c] = await Promise.all([worker(), worker(), worker()]);
    const client = await dialOnlyAgent({ maxChannels: 2 });
    await client.send(a.addresses[0]!, 'work', 1);
    await client.send(b.addresses[0]!, 'work', 2);
    const [toA, toB] = client.channels();
    await client.send(a.addresses[0]!, 'work', 3); // a's channel, the older one, is now the most recently used
    expect(await client.send(c.addresses[0]!, 'work', 4)).toBe(4);
    expect(toA!.isClosed).toBe(false);
    expect(toB!.isClosed).toBe(true);
    await expect(toB!.closed).resolves.toMatchObject({ code: 'CLOSED', message: expect.stringContaining('maxChannels 2') });
    expect(client.channels()).toHaveLength(2);
  });

  it('pings channels for health and records their round-trip time', async () => {
    // Timers only: the round trip is measured on the real performance clock, across real sockets.
    useFakeClock(['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date']);
    const server = await worker();
    const client = await dialOnlyAgent({ healthCheckIntervalMs: 50 });
    await client.send(server.addresses[0]!, 'work', 1);
    await vi.advanceTimersByTimeAsync(49);
    expect(client.stats().channels.map((c) => c.rttMs)).toEqual([undefined]); // no ping before the interval
    const before = performance.now();
    await vi.advanceTimersByTimeAsync(1);
    await until(() => client.stats().channels[0]?.rttMs !== undefined);
    const elapsed = performance.now() - before;
    const [stats] = client.stats().channels;
    expect(stats?.kind).toBe('ws');
    expect(stats?.rttMs).toBeGreaterThan(0);
    expect(stats?.rttMs).toBeLessThanOrEqual(elapsed); // a round trip the test saw happen, not a made-up figure
    expect(client.channels()).toHaveLength(1); // a healthy channel stays open
  });

  it('fails fast: a method with no handler, or a peer nobody listens for', async () => {
    useFakeClock();
    const server = await worker();
    const dials = dialWatch();
    const client = await dialOnlyAgent({}, dials);
    const started = Date.now();
    // Both fail without waiting out a deadline (30 s) or the connect timeout (10 s): the fake clock stands still …
    await expect(client.send(server.addresses[0]!, 'nope')).rejects.toMatchObject({ code: 'NO_HANDLER', remote: true });
    expect(Date.now()).toBe(started);
    const nobody = Identity.generate().id;
    const closedPort = `${nobody}@wss://127.0.0.1:${await freePort()}/agentlink`;
    const seen: string[] = [];
    const onStart = (m: unknown): void => void seen.push(`start ${(m as { attempt: number }).attempt}`);
    const onError = (m: unknown): void => {
      const { peer, attempt, retryInMs, error } = m as { peer: string; attempt: number; retryInMs?: number; error: AgentError };
      expect(peer).toBe(nobody);
      expect(error.code).toBe('UNAVAILABLE');
      seen.push(retryInMs === undefined ? `gave up after ${attempt}` : `retry after ${attempt} in ${retryInMs < 50 * 2 ** (attempt - 1) ? 'time' : retryInMs}`);
    };
    diagnostics.subscribe('agentlink:dial:start', onStart);
    diagnostics.subscribe('agentlink:dial:error', onError);
    try {
      const refused = await throughRefusedDials(dials, () => client.send(closedPort, 'work', 1));
      expect(refused).toMatchObject({ code: 'UNAVAILABLE' });
    } finally {
      diagnostics.unsubscribe('agentlink:dial:start', onStart);
      diagnostics.unsubscribe('agentlink:dial:error', onError);
    }
    // … but for the dialer's two backoffs (under 50, then under 100 ms) between its refused attempts, each of
    // them announced on diagnostics_channel.
    expect(dials.failed.count).toBe(DIAL_ATTEMPTS);
    expect(Date.now() - started).toBeLessThan(150);
    expect(seen).toEqual(['start 1', 'retry after 1 in time', 'start 2', 'retry after 2 in time', 'start 3', 'gave up after 3']);
  });
});
