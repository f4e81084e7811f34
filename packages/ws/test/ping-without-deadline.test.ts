import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAgent, type Agent } from '@agentlink/core';
import { webSocket } from '../src/index.js';

/**
 * `defaultTimeoutMs: Infinity` means calls have no deadline, and a ping made without `timeoutMs` takes that default.
 * A ping armed `setTimeout(…, Infinity)`, which node fires after 1 ms: every ping and `pathTo` of such an agent
 * failed with "no pong within Infinity ms" unless its pong came within a millisecond.
 */
describe('a ping without a deadline', () => {
  let server: Agent;
  let client: Agent;
  let address: string;

  beforeAll(async () => {
    server = await createAgent({ channels: [webSocket({ port: 0 })] });
    server.handle('echo', (body: unknown) => body);
    client = await createAgent({ channels: [webSocket()], defaultTimeoutMs: Number.POSITIVE_INFINITY });
    address = server.addresses[0]!;
    expect(await client.send(address, 'echo', 'open the channel')).toBe('open the channel');
  });
  afterAll(async () => {
    vi.useRealTimers();
    await Promise.all([client.close(), server.close()]);
  });

  /** Starts `ping`, lets it arm whatever it arms (no I/O can happen meanwhile), then moves the clock a day on. */
  async function pingAcrossADay(ping: () => Promise<number>): Promise<number> {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const pinging = ping();
    for (let i = 0; i < 100; i++) await Promise.resolve();
    vi.advanceTimersByTime(24 * 3600 * 1000);
    vi.useRealTimers();
    return pinging;
  }

  it('waits for its pong however long the clock runs (defaultTimeoutMs: Infinity)', async () => {
    expect(await pingAcrossADay(() => client.ping(address))).toBeGreaterThan(0);
    expect(await pingAcrossADay(async () => (await client.pathTo(address)).rttMs)).toBeGreaterThan(0);
  });

  it("and so does one given a timeout past node's longest timer (2^31 − 1 ms)", async () => {
    expect(await pingAcrossADay(() => client.ping(address, { timeoutMs: 2 ** 31 }))).toBeGreaterThan(0);
  });
});
