import diagnostics from 'node:diagnostics_channel';
import { AgentError, CallMetrics, CircuitBreaker, Identity, rateLimit, retry, tapHandler, timeout, type BreakerStateChange, type Interceptor } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAgents, dialOnlyAgent, sleep, wsAgent } from './helpers.js';

afterEach(closeAgents);

describe('middleware over real WebSocket channels', () => {
  it('retry: an idempotent call survives a peer restart; a non-idempotent one fails and is not resent', async () => {
    const identity = Identity.generate();
    let server = await wsAgent({ identity });
    const port = Number(new URL(server.addresses[0]!.split('@')[1]!).port);
    const address = server.addresses[0]!;
    const runs: string[] = [];
    const serve = (agent: typeof server, generation: string) =>
      agent.handle('work', async (tag: string) => {
        runs.push(`${generation}:${tag}`);
        await sleep(generation === 'first' ? 300 : 0);
        return `${tag} done by ${generation}`;
      });
    serve(server, 'first');
    const retries: string[] = [];
    const client = await dialOnlyAgent({
      interceptors: [retry({ maxAttempts: 8, baseDelayMs: 50, maxDelayMs: 200, onRetry: (call, error) => retries.push(`${call.metadata.tag}:${error.code}`) })],
    });
    const idempotent = client.send(address, 'work', 'safe', { idempotent: true, metadata: { tag: 'safe' }, timeoutMs: 10_000 });
    const once = client.send(address, 'work', 'once', { metadata: { tag: 'once' }, timeoutMs: 10_000 }).catch((e: AgentError) => e);
    await sleep(100);
    await server.close(); // the peer goes down with both calls in flight …
    await sleep(150);
    server = await wsAgent({ identity, port }); // … and comes back on the same address
    serve(server, 'second');

    expect(await idempotent).toBe('safe done by second');
    const failure = await once;
    expect(failure).toBeInstanceOf(AgentError);
    expect((failure as AgentError).retryable).toBe(true);
    expect(runs.filter((r) => r.endsWith('once'))).toEqual(['first:once']);
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(retries.every((r) => r.startsWith('safe:'))).toBe(true);
  });

  it('circuit breaker: opens after the configured failures, fails fast while open, half-opens later', async () => {
    const identity = Identity.generate();
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const address = `${identity.id}@wss://127.0.0.1:${port}/agentlink`;
    const breaker = new CircuitBreaker({ failureThreshold: 3, openMs: 300 });
    const changes: string[] = [];
    breaker.on('state', (c: BreakerStateChange) => changes.push(`${c.from}->${c.to}`));
    const published: unknown[] = [];
    const onPublish = (message: unknown) => published.push(message);
    diagnostics.subscribe('agentlink:breaker:state', onPublish);
    const client = await dialOnlyAgent({ interceptors: [breaker.interceptor] });

    for (let i = 0; i < 3; i++) await expect(client.send(address, 'work')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(breaker.state(identity.id)).toBe('open');
    const started = performance.now();
    await expect(client.send(address, 'work')).rejects.toThrow(/circuit open/);
    expect(performance.now() - started).toBeLessThan(20);

    await sleep(320);
    expect(breaker.state(identity.id)).toBe('half-open');
    const server = await wsAgent({ identity, port });
    server.handle('work', () => 'ok');
    expect(await client.send(address, 'work')).toBe('ok');
    expect(breaker.state(identity.id)).toBe('closed');
    expect(changes).toEqual(['closed->open', 'open->half-open', 'half-open->closed']);
    diagnostics.unsubscribe('agentlink:breaker:state', onPublish);
    expect(published).toHaveLength(3);
  });

  it('circuit breaker: a failed trial call opens the circuit again', async () => {
    const identity = Identity.generate();
    const address = `${identity.id}@wss://127.0.0.1:1/agentlink`;
    const breaker = new CircuitBreaker({ failureThreshold: 2, openMs: 100 });
    const client = await dialOnlyAgent({ interceptors: [breaker.interceptor] });
    for (let i = 0; i < 2; i++) await client.send(address, 'work').catch(() => undefined);
    await sleep(120);
    await expect(client.send(address, 'work')).rejects.toThrow(/cannot reach|refused|ECONNREFUSED/);
    expect(breaker.state(identity.id)).toBe('open');
  });

  it('rate limit: calls over the rate wait their turn, and fail at once beyond maxWaitMs', async () => {
    const server = await wsAgent();
    server.handle('work', (n: number) => n);
    const client = await dialOnlyAgent({ interceptors: [rateLimit({ perPeer: { ratePerSecond: 50, burst: 5 }, maxWaitMs: 400 })] });
    const address = server.addresses[0]!;
    const started = performance.now();
    const times: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 15 }, (_, i) => client.send<number>(address, 'work', i).then((n) => (times.push(performance.now() - started), n))),
    );
    expect(results).toEqual(Array.from({ length: 15 }, (_, i) => i));
    // 5 at once, then one per 20 ms: the 15th is due at ~200 ms.
    expect(Math.max(...times)).toBeGreaterThan(180);
    const burst = await Promise.all(Array.from({ length: 40 }, () => client.send(address, 'work', 0).catch((e: AgentError) => e.code)));
    expect(burst.filter((r) => r === 'RESOURCE_EXHAUSTED').length).toBeGreaterThan(0);
    expect(burst.filter((r) => r === 0).length).toBeGreaterThan(15);
  });

  it('timeout + retry: a slow attempt is cut off and the retry succeeds', async () => {
    const server = await wsAgent();
    let calls = 0;
    server.handle('flaky', async (_: unknown, ctx) => {
      calls++;
      if (calls === 1) await sleep(1000);
      return ctx.signal.aborted ? 'late' : 'fast';
    });
    const client = await dialOnlyAgent({ interceptors: [retry({ baseDelayMs: 1 }), timeout({ ms: 100 })] });
    const started = performance.now();
    expect(await client.send(server.addresses[0]!, 'flaky', null, { idempotent: true })).toBe('fast');
    expect(performance.now() - started).toBeLessThan(800);
    expect(calls).toBe(2);
  });

  it('metrics: calls by method and outcome, latency histogram, queue depth and channels as Prometheus text', async () => {
    const server = await wsAgent();
    server.handle('add', ({ a, b }: { a: number; b: number }) => a + b);
    server.handleStream('count', async function* (n: number) {
      for (let i = 0; i < n; i++) yield i;
    });
    const metrics = new CallMetrics();
    const ended: unknown[] = [];
    const onEnd = (m: unknown) => ended.push(m);
    diagnostics.subscribe('agentlink:call:end', onEnd);
    const client = await dialOnlyAgent({ interceptors: [metrics.interceptor] });
    const address = server.addresses[0]!;
    for (let i = 0; i < 3; i++) await client.send(address, 'add', { a: i, b: 1 });
    await client.send(address, 'missing').catch(() => undefined);
    for await (const _ of client.stream(address, 'count', 4));
    diagnostics.unsubscribe('agentlink:call:end', onEnd);

    const text = metrics.prometheus(client);
    expect(text).toContain('agentlink_calls_total{method="add",code="OK"} 3');
    expect(text).toContain('agentlink_calls_total{method="missing",code="NO_HANDLER"} 1');
    expect(text).toContain('agentlink_call_duration_seconds_count{method="add"} 3');
    expect(text).toContain('agentlink_call_duration_seconds_bucket{method="add",le="+Inf"} 3');
    expect(text).toContain('agentlink_stream_items_total{method="count"} 4');
    expect(text).toContain('agentlink_channels{kind="ws"} 1');
    expect(text).toContain('agentlink_pending_calls{priority="low"} 0');
    expect(text).toContain('agentlink_calls_in_flight 0');
    expect(ended).toHaveLength(4); // 3 adds and the stream; the failed call went to agentlink:call:error
    expect(metrics.snapshot().methods.add?.count).toBe(3);
  });

  it('a ten-line custom interceptor: stamps a trace id and logs each call', async () => {
    const server = await wsAgent();
    server.handle('whoami', (_: unknown, ctx) => ctx.metadata['trace-id']);
    const log: string[] = [];
    const tracing: Interceptor = (dispatch) => (call, handler) => {
      const traceId = `t-${Math.random().toString(36).slice(2)}`;
      call.setMetadata('trace-id', traceId);
      dispatch(call, tapHandler(handler, {
        onEnd: () => log.push(`${traceId} ${call.method} ok`),
        onError: (error) => log.push(`${traceId} ${call.method} ${error.code}`),
      }));
    };
    const client = await dialOnlyAgent({ interceptors: [tracing] });
    const traceId = await client.send<string>(server.addresses[0]!, 'whoami');
    expect(traceId).toMatch(/^t-/);
    expect(log).toEqual([`${traceId} whoami ok`]);
  });
});
