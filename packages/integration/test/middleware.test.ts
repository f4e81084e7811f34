import diagnostics from 'node:diagnostics_channel';
import { AgentError, CallMetrics, CircuitBreaker, Identity, rateLimit, retry, tapHandler, timeout, type BreakerStateChange, type Interceptor } from '@agentlink/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  DIAL_ATTEMPTS,
  Tally,
  closeAgents,
  dialOnlyAgent,
  dialWatch,
  freePort,
  gate,
  portOf,
  settledWithoutIo,
  stepDialBackoffs,
  throughRefusedDials,
  useFakeClock,
  wsAgent,
} from './helpers.js';

afterEach(closeAgents);

describe('middleware over real WebSocket channels', () => {
  it('retry: an idempotent call survives a peer restart; a non-idempotent one fails and is not resent', async () => {
    useFakeClock();
    const identity = Identity.generate();
    let server = await wsAgent({ identity });
    const port = portOf(server);
    const address = server.addresses[0]!;
    const runs: string[] = [];
    const arrived = new Tally();
    // The first generation holds every call until it goes down; the second answers at once.
    server.handle('work', async (tag: string, ctx) => {
      runs.push(`first:${tag}`);
      arrived.add();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      return `${tag} done by first`;
    });
    const retries: string[] = [];
    const retried = new Tally();
    const dials = dialWatch();
    const client = await dialOnlyAgent(
      {
        interceptors: [
          retry({
            maxAttempts: 8,
            baseDelayMs: 50,
            maxDelayMs: 200,
            onRetry: (call, error) => (retries.push(`${call.metadata.tag}:${error.code}`), retried.add()),
          }),
        ],
      },
      dials,
    );
    const idempotent = client.send(address, 'work', 'safe', { idempotent: true, metadata: { tag: 'safe' }, timeoutMs: 10_000 });
    const once = client.send(address, 'work', 'once', { metadata: { tag: 'once' }, timeoutMs: 10_000 }).catch((e: AgentError) => e);
    await arrived.reached(2);
    await server.close(); // the peer goes down with both calls in flight …

    const failure = await once;
    expect(failure).toBeInstanceOf(AgentError);
    expect((failure as AgentError).retryable).toBe(true);
    await retried.reached(1); // … the idempotent call waits (on the fake clock) to be tried again …
    expect(dials.started.count).toBe(1);

    // … and its next attempt, while the peer is down, is refused three times: another retry is due.
    const refusedBefore = dials.failed.count;
    const dialBackoffs = stepDialBackoffs(DIAL_ATTEMPTS - 1);
    await vi.advanceTimersToNextTimerAsync(); // the retry's backoff
    await dialBackoffs;
    await dials.failed.reached(refusedBefore + DIAL_ATTEMPTS);
    await retried.reached(2);
    // Both calls lost the same connection; the idempotent one then found nobody listening.
    expect(retries).toEqual([`safe:${(failure as AgentError).code}`, 'safe:UNAVAILABLE']);

    server = await wsAgent({ identity, port }); // the peer comes back on the same address …
    server.handle('work', (tag: string) => {
      runs.push(`second:${tag}`);
      return `${tag} done by second`;
    });
    await vi.advanceTimersToNextTimerAsync(); // … before the next retry is due, which reaches it
    expect(await idempotent).toBe('safe done by second');
    expect(runs.sort()).toEqual(['first:once', 'first:safe', 'second:safe']);
    expect(retries).toHaveLength(2);
    // Two dials connected: the first and the one to the peer back up. The ones in between were refused (at least
    // DIAL_ATTEMPTS of them: once, in a full run beside two CPU burners, there was one refused dial more).
    const counts = `started ${dials.started.count}, opened ${dials.opened.count}, failed ${dials.failed.count}`;
    expect(dials.started.count - dials.failed.count, counts).toBe(2);
    expect(dials.failed.count, counts).toBeGreaterThanOrEqual(DIAL_ATTEMPTS);
  });

  it('circuit breaker: opens after the configured failures, fails fast while open, half-opens later', async () => {
    useFakeClock();
    const identity = Identity.generate();
    const port = await freePort();
    const address = `${identity.id}@wss://127.0.0.1:${port}/agentlink`;
    const breaker = new CircuitBreaker({ failureThreshold: 3, openMs: 300 });
    const changes: string[] = [];
    breaker.on('state', (c: BreakerStateChange) => changes.push(`${c.from}->${c.to}`));
    const published: unknown[] = [];
    const onPublish = (message: unknown) => published.push(message);
    diagnostics.subscribe('agentlink:breaker:state', onPublish);
    try {
      const dials = dialWatch();
      const client = await dialOnlyAgent({ interceptors: [breaker.interceptor] }, dials);

      for (let i = 0; i < 3; i++) {
        expect(breaker.state(identity.id)).toBe('closed');
        expect(await throughRefusedDials(dials, () => client.send(address, 'work'))).toMatchObject({ code: 'UNAVAILABLE' });
      }
      expect(breaker.state(identity.id)).toBe('open');
      expect(changes).toEqual(['closed->open']);
      const openedAt = Date.now();

      // Fails fast: settled before any I/O or timer, with no dial, the whole wait still ahead of it.
      const fast = await settledWithoutIo(client.send(address, 'work'));
      expect(fast.state).toBe('rejected');
      expect((fast as { reason: AgentError }).reason).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/circuit open.*next trial in 300 ms/) });
      expect(dials.started.count).toBe(3 * DIAL_ATTEMPTS);

      await vi.advanceTimersByTimeAsync(299);
      expect(breaker.state(identity.id)).toBe('open');
      await vi.advanceTimersByTimeAsync(1);
      expect(Date.now() - openedAt).toBe(300);
      expect(breaker.state(identity.id)).toBe('half-open');
      const server = await wsAgent({ identity, port });
      server.handle('work', () => 'ok');
      expect(await client.send(address, 'work')).toBe('ok');
      expect(breaker.state(identity.id)).toBe('closed');
      expect(changes).toEqual(['closed->open', 'open->half-open', 'half-open->closed']);
      expect(published).toHaveLength(3);
    } finally {
      diagnostics.unsubscribe('agentlink:breaker:state', onPublish);
    }
  });

  it('circuit breaker: a failed trial call opens the circuit again', async () => {
    useFakeClock();
    const identity = Identity.generate();
    const address = `${identity.id}@wss://127.0.0.1:${await freePort()}/agentlink`;
    const breaker = new CircuitBreaker({ failureThreshold: 2, openMs: 100 });
    const changes: string[] = [];
    breaker.on('state', (c: BreakerStateChange) => changes.push(`${c.from}->${c.to}`));
    const dials = dialWatch();
    const client = await dialOnlyAgent({ interceptors: [breaker.interceptor] }, dials);
    for (let i = 0; i < 2; i++) await throughRefusedDials(dials, () => client.send(address, 'work'));
    expect(breaker.state(identity.id)).toBe('open');
    await vi.advanceTimersByTimeAsync(100);
    expect(breaker.state(identity.id)).toBe('half-open');

    const trial = await throughRefusedDials(dials, () => client.send(address, 'work'));
    expect(trial).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/cannot reach|refused|ECONNREFUSED/) });
    expect(breaker.state(identity.id)).toBe('open');
    expect(changes).toEqual(['closed->open', 'open->half-open', 'half-open->open']);
    // Open again for the whole openMs from the trial's failure: the next call fails at once.
    const next = await settledWithoutIo(client.send(address, 'work'));
    expect((next as { reason: AgentError }).reason).toMatchObject({ message: expect.stringMatching(/circuit open.*next trial in 100 ms/) });
  });

  it('rate limit: calls over the rate wait their turn, and fail at once beyond maxWaitMs', async () => {
    useFakeClock();
    const server = await wsAgent();
    server.handle('work', (n: number) => n);
    const client = await dialOnlyAgent({ interceptors: [rateLimit({ perPeer: { ratePerSecond: 50, burst: 5 }, maxWaitMs: 400 })] });
    const address = server.addresses[0]!;
    const started = performance.now();
    const doneAt: number[] = [];
    const calls = Array.from({ length: 15 }, (_, i) => client.send<number>(address, 'work', i).then((n) => ((doneAt[i] = performance.now() - started), n)));
    await Promise.all(calls.slice(0, 5)); // the burst goes at once …
    for (let i = 5; i < 15; i++) {
      expect(await settledWithoutIo(calls[i]!)).toEqual({ state: 'pending' });
      await vi.advanceTimersByTimeAsync(20); // … then one call per 20 ms
      await calls[i];
    }
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    // 5 at once, then one per 20 ms of the fake clock: the 15th is released at exactly 200 ms.
    expect(doneAt).toEqual([0, 0, 0, 0, 0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200]);

    // The bucket is empty now: of 40 more calls the first 20 wait up to 400 ms, the rest fail at once.
    const burst = Array.from({ length: 40 }, () => client.send(address, 'work', 0).catch((e: AgentError) => e.code));
    const atOnce = await Promise.all(burst.map((call) => settledWithoutIo(call)));
    expect(atOnce.slice(0, 20).every((s) => s.state === 'pending')).toBe(true);
    expect(atOnce.slice(20)).toEqual(Array.from({ length: 20 }, () => ({ state: 'fulfilled', value: 'RESOURCE_EXHAUSTED' })));
    await vi.advanceTimersByTimeAsync(400);
    expect(await Promise.all(burst)).toEqual([...Array.from({ length: 20 }, () => 0), ...Array.from({ length: 20 }, () => 'RESOURCE_EXHAUSTED')]);
  });

  it('timeout + retry: a slow attempt is cut off and the retry succeeds', async () => {
    useFakeClock();
    const server = await wsAgent();
    let calls = 0;
    const firstArrived = gate();
    const firstCancelled = gate();
    server.handle('flaky', async (_: unknown, ctx) => {
      calls++;
      if (calls === 1) {
        firstArrived.open();
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)); // slow: only the cut-off ends it
        firstCancelled.open();
      }
      return ctx.signal.aborted ? 'late' : 'fast';
    });
    const retries: Array<{ code: string; at: number }> = [];
    const retried = new Tally();
    const client = await dialOnlyAgent({
      interceptors: [retry({ baseDelayMs: 1, onRetry: (_call, error) => (retries.push({ code: error.code, at: Date.now() }), retried.add()) }), timeout({ ms: 100 })],
    });
    const started = Date.now();
    const reply = client.send(server.addresses[0]!, 'flaky', null, { idempotent: true });
    await firstArrived.wait;
    await vi.advanceTimersByTimeAsync(99);
    expect(retries).toEqual([]);
    await vi.advanceTimersByTimeAsync(1); // the attempt's 100 ms are up
    await retried.reached(1);
    expect(retries).toEqual([{ code: 'DEADLINE_EXCEEDED', at: started + 100 }]);
    await firstCancelled.wait; // the cut-off reached the server's handler
    await vi.advanceTimersToNextTimerAsync(); // the retry's backoff (at most 1 ms)
    expect(await reply).toBe('fast');
    expect(Date.now() - started).toBeLessThanOrEqual(101);
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
