import { describe, expect, it } from 'vitest';
import { CircuitBreaker, createAgent, rateLimit, retry, timeout, type AgentOptions } from '../src/index.js';
import { resolveListenerLimits } from '../src/transport.js';
import { memoryTransport } from './memory-transport.js';

/** The INVALID_ARGUMENT a factory throws, or fails the test. */
function invalid(make: () => unknown): string {
  try {
    make();
  } catch (error) {
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    return (error as Error).message;
  }
  throw new Error('expected INVALID_ARGUMENT');
}

describe('options are validated one by one, naming the option and the value', () => {
  it('agent and pool', async () => {
    const agentWith = async (options: Partial<AgentOptions>) => {
      try {
        await (await createAgent({ channels: [memoryTransport(new Map())], ...options })).close();
      } catch (error) {
        expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
        return (error as Error).message;
      }
      throw new Error('expected INVALID_ARGUMENT');
    };
    // Zero calls per channel would make every call wait for its deadline: refused up front.
    expect(await agentWith({ maxCallsPerChannel: 0 })).toBe('maxCallsPerChannel must be a positive integer, got 0');
    expect(await agentWith({ maxChannelsPerPeer: 1.5 })).toBe('maxChannelsPerPeer must be a positive integer, got 1.5');
    expect(await agentWith({ idleTimeoutMs: -1 })).toBe('idleTimeoutMs must be an integer from 0 to 2147483647, got -1');
    // Timer periods above node's longest delay fire after 1 ms: a health check of every channel, every millisecond.
    expect(await agentWith({ healthCheckIntervalMs: 2 ** 31 })).toBe('healthCheckIntervalMs must be an integer from 0 to 2147483647, got 2147483648');
    expect(await agentWith({ connectTimeoutMs: 2 ** 31 })).toBe('connectTimeoutMs must be an integer from 1 to 2147483647, got 2147483648');
    expect(await agentWith({ minChannelsPerPeer: 5, maxChannelsPerPeer: 2 })).toMatch(/minChannelsPerPeer \(5\) must not exceed/);
    expect(await agentWith({ requestTimeoutMs: 0 })).toBe('requestTimeoutMs must be an integer from 1 to 2147483647, got 0');
    expect(await agentWith({ maxFrameSize: Number.NaN })).toBe('maxFrameSize must be a positive integer, got NaN');
    expect(await agentWith({ defaultTimeoutMs: -5 })).toBe('defaultTimeoutMs must be a non-negative integer, got -5');
    const ok = await createAgent({ channels: [memoryTransport(new Map())], defaultTimeoutMs: Number.POSITIVE_INFINITY, idleTimeoutMs: 0 });
    await ok.close();
  });

  it("listener limits: the handshake bound is a node timer, within node's longest delay", () => {
    // Above 2^31 − 1 ms a timer fires after 1 ms: every handshake would have been cut at once.
    expect(invalid(() => resolveListenerLimits({ handshakeTimeoutMs: 2 ** 31 }))).toBe('listener option handshakeTimeoutMs must be at most 2147483647, got 2147483648');
    expect(resolveListenerLimits({ handshakeTimeoutMs: 2 ** 31 - 1 }).handshakeTimeoutMs).toBe(2 ** 31 - 1);
  });

  it('interceptors', () => {
    expect(invalid(() => retry({ maxAttempts: 0 }))).toBe('retry maxAttempts must be a positive integer, got 0');
    expect(invalid(() => retry({ baseDelayMs: -1 }))).toBe('retry baseDelayMs must be a non-negative number, got -1');
    expect(invalid(() => rateLimit({ perPeer: { ratePerSecond: 10, burst: 0 } }))).toBe('rateLimit perPeer.burst must be a positive number, got 0');
    expect(invalid(() => rateLimit({ global: { ratePerSecond: Number.POSITIVE_INFINITY } }))).toBe('rateLimit global.ratePerSecond must be a positive number, got Infinity');
    expect(invalid(() => timeout({ ms: 100, methods: { slow: 0 } }))).toBe('timeout methods.slow must be a positive number, got 0');
    expect(invalid(() => new CircuitBreaker({ halfOpenCalls: 0 }))).toBe('circuitBreaker halfOpenCalls must be a positive integer, got 0');
  });
});
