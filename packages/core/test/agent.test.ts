import type { Transport } from '../src/index.js';
import type { Channel, DialContext, ListenContext } from '../src/transport.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentError, Identity, createAgent, rateLimit, retry, tapHandler, type Agent, type Interceptor } from '../src/index.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  vi.useRealTimers(); // a test that failed on the fake clock must not leave it to the next one
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function pair() {
  const network = new Map<string, ListenContext>();
  const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
  const transport = memoryTransport(network);
  const client = await createAgent({ channels: [transport] });
  agents.push(server, client);
  server.handle('context', (_b: unknown, ctx) => ({ deadline: ctx.deadline ?? null }));
  server.handle('add', ({ a, b }: { a: number; b: number }) => a + b);
  server.handleStream('count', async function* (n: number) {
    for (let i = 0; i < n; i++) yield i;
  });
  return { server, client, transport, address: server.addresses[0]! };
}

describe('Agent', () => {
  it('addresses are "<AgentId>@<url>" and a bare AgentId works once the address is known', async () => {
    const { server, client, address } = await pair();
    expect(address).toBe(`${server.id}@memory://server`);
    expect(await client.send(address, 'add', { a: 1, b: 2 })).toBe(3);
    expect(await client.send(server.id, 'add', { a: 2, b: 2 })).toBe(4);
  });

  it('concurrent first calls to a peer share one dial and one channel', async () => {
    const { client, transport, address } = await pair();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.send(address, 'add', { a: i, b: 0 })));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(transport.dials).toBe(1);
    expect(client.channels()).toHaveLength(1);
  });

  it('deadlines: Infinity means none; one beyond the timer range does not fire early', async () => {
    const { client, address } = await pair();
    expect(await client.send(address, 'context', null, { timeoutMs: Number.POSITIVE_INFINITY })).toEqual({ deadline: null });
    const far = 40 * 24 * 3600 * 1000; // 40 days: setTimeout would fire at once
    const { deadline } = await client.send<{ deadline: number }>(address, 'context', null, { timeoutMs: far });
    expect(deadline).toBeGreaterThan(Date.now() + far - 60_000);
  });

  it('rejects a negative or NaN timeout with INVALID_ARGUMENT', async () => {
    const { client, address } = await pair();
    for (const timeoutMs of [-1, Number.NaN]) {
      await expect(client.send(address, 'add', { a: 1, b: 1 }, { timeoutMs })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });

  it('a peer with no known address fails at once with UNAVAILABLE naming the fix', async () => {
    const { client } = await pair();
    // UNAVAILABLE, not DEADLINE_EXCEEDED, under a 120 s deadline: the call did not wait for anything.
    await expect(client.send(Identity.generate().id, 'add', {}, { timeoutMs: 120_000 })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('<AgentId>@<url>'),
    });
  });

  it('a malformed peer reference is INVALID_ARGUMENT', async () => {
    const { client } = await pair();
    for (const bad of ['not-an-id', `${Identity.generate().id}@not a url`, '']) {
      await expect(client.send(bad, 'add', {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    // A wrong AgentId says what a peer reference looks like, not only that the id has the wrong length.
    for (const bad of ['not-an-id', 'wss://127.0.0.1:4433/agentlink']) {
      await expect(client.send(bad, 'add', {})).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining(`peer "${bad}": an AgentId has 52 base32 characters, got ${bad.length}; call a peer as "<AgentId>" or "<AgentId>@<url>"`),
      });
    }
  });

  it('an address whose channel kind is not configured is UNAVAILABLE with the reason', async () => {
    const { client } = await pair();
    await expect(client.send(`${Identity.generate().id}@quic://127.0.0.1:1`, 'x')).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('no configured channel dials quic:'),
    });
  });

  it('stream() on a unary method yields its one result; send() on a streaming method is INVALID_ARGUMENT', async () => {
    const { client, address } = await pair();
    const items: unknown[] = [];
    for await (const item of client.stream(address, 'add', { a: 2, b: 3 })) items.push(item);
    expect(items).toEqual([5]);
    await expect(client.send(address, 'count', 3)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('a closed agent refuses calls with CLOSED and fails calls in flight', async () => {
    const { server, client, address } = await pair();
    let arrived!: () => void;
    const reachedHandler = new Promise<void>((resolve) => (arrived = resolve));
    server.handle('never', () => {
      arrived();
      return new Promise(() => undefined);
    });
    const inFlight = client.send(address, 'never', null, { timeoutMs: 120_000 });
    await reachedHandler; // the call is in flight, not waiting to start
    await client.close();
    const error = await inFlight.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('CLOSED');
    await expect(client.send(address, 'add', {})).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('an agent makes one certificate, which it listens and dials with (one TLS context, not one each)', async () => {
    const contexts: Array<{ tls: unknown }> = [];
    const recording: Transport = {
      kind: 'recording',
      protocols: ['recording:'],
      listen: async (context: ListenContext) => {
        contexts.push(context);
        return { addresses: [], close: async () => undefined };
      },
      dial: async (_url: URL, context: DialContext) => {
        contexts.push(context);
        throw new AgentError('UNAVAILABLE', 'nothing here');
      },
    };
    const agent = await createAgent({ channels: [recording] });
    agents.push(agent);
    await expect(agent.send(`${Identity.generate().id}@recording://nowhere`, 'echo', 1)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(contexts.length).toBeGreaterThanOrEqual(2); // the listen, and the dial (tried again: UNAVAILABLE)
    for (const context of contexts) expect(context.tls).toBe(contexts[0]!.tls);
  });

  it('an agent needs at least one channel', async () => {
    await expect(createAgent({ channels: [] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('channel choice', () => {
  /** How long the preferred channel kind has to itself before the next one is dialled too (core's peer dialer). */
  const STAGGER_MS = 250;

  /** A transport whose dials never complete until cancelled: a blackholed address. */
  function blackhole(protocol: string): Transport & { attempts: number; cancelled: number } {
    const transport = {
      kind: protocol.replace(':', ''),
      protocols: [protocol],
      attempts: 0,
      cancelled: 0,
      listen: async () => ({ addresses: [], close: async () => undefined }),
      dial: (_url: URL, context: DialContext) =>
        new Promise<Channel>((_resolve, reject) => {
          transport.attempts++;
          context.signal.addEventListener('abort', () => {
            transport.cancelled++;
            reject(new AgentError('UNAVAILABLE', 'blackholed'));
          });
        }),
    };
    return transport;
  }

  it('prefers channel kinds in the order given, falling back (happy eyeballs) when the preferred one hangs', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'srv')] });
    server.handle('echo', (body: unknown) => body);
    const hole = blackhole('slow:');
    const memory = memoryTransport(network);
    const client = await createAgent({ channels: [hole, memory] });
    agents.push(server, client);
    client.addPeer(`${server.id}@memory://srv`);
    client.addPeer(`${server.id}@slow://192.0.2.1:1`);
    const started = Date.now();
    const reply = client.send(server.id, 'echo', 'via fallback', { timeoutMs: 5000 });
    await vi.advanceTimersByTimeAsync(STAGGER_MS - 1);
    expect(hole.attempts).toBe(1); // tried first: it is the preferred kind …
    expect(memory.dials).toBe(0); // … and alone for its head start
    await vi.advanceTimersByTimeAsync(1);
    expect(memory.dials).toBe(1);
    expect(await reply).toBe('via fallback');
    expect(Date.now() - started).toBe(STAGGER_MS); // nobody waited for the preferred kind's timeout
    expect(hole.attempts).toBe(1);
    expect(hole.cancelled).toBe(1); // cancelled once the fallback won
    expect(client.channels(server.id).map((c) => c.kind)).toEqual(['memory']);
  });

  it('closes channels that stayed idle, and not those in use', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'idle')] });
    server.handle('echo', (body: unknown) => body);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let heldCalls = 0;
    server.handle('hold', () => (heldCalls++, held.then(() => 'released')));
    const client = await createAgent({ channels: [memoryTransport(network)], idleTimeoutMs: 200 });
    agents.push(server, client);
    const address = server.addresses[0]!;
    // Sequential calls, one per idle check (every 50 ms), for 2.5 idle timeouts: never idle, never closed.
    for (let i = 0; i < 10; i++) {
      expect(await client.send(address, 'echo', i)).toBe(i);
      await vi.advanceTimersByTimeAsync(50);
    }
    expect(client.channels()).toHaveLength(1);
    const [channel] = client.channels();
    // A call in progress for 2.5 idle timeouts keeps the channel open too.
    const hold = client.send(address, 'hold');
    while (heldCalls === 0) await new Promise((resolve) => setImmediate(resolve));
    await vi.advanceTimersByTimeAsync(500);
    expect(channel!.isClosed).toBe(false);
    release();
    expect(await hold).toBe('released');
    // Unused from now: idle from the next check, closed at the first check 200 ms after that.
    await vi.advanceTimersByTimeAsync(200);
    expect(client.channels()).toEqual([channel]);
    await vi.advanceTimersByTimeAsync(50);
    expect(client.channels()).toEqual([]);
    const reason = await channel!.closed;
    expect(reason.code).toBe('CLOSED');
    expect(reason.message).toMatch(/idle/);
    expect(await client.send(address, 'echo', 'redial')).toBe('redial');
  });

  it('a dial that fails for a passing reason is tried again with jittered backoff; a wrong key is not', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const network = new Map<string, ListenContext>();
      const server = await createAgent({ channels: [memoryTransport(network, 'flaky')] });
      server.handle('echo', (body: unknown) => body);
      const memory = memoryTransport(network);
      let resets = 2;
      const flaky: Transport = {
        ...memory,
        dial: (url, context) => (resets-- > 0 ? Promise.reject(new AgentError('UNAVAILABLE', 'read ECONNRESET')) : memory.dial(url, context)),
      };
      const client = await createAgent({ channels: [flaky] });
      agents.push(server, client);
      const reply = client.send(server.addresses[0]!, 'echo', 'third time lucky', { timeoutMs: 5000 });
      await vi.advanceTimersByTimeAsync(50 + 100); // the two backoffs at most: 50 ms, then 100 ms (full jitter)
      expect(await reply).toBe('third time lucky');
      expect(resets).toBe(-1);

      let wrongKeyDials = 0;
      const impostor: Transport = { ...memory, dial: () => (wrongKeyDials++, Promise.reject(new AgentError('UNAUTHENTICATED', 'wrong key'))) };
      const careful = await createAgent({ channels: [impostor] });
      agents.push(careful);
      await expect(careful.send(server.addresses[0]!, 'echo', 1, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
      expect(wrongKeyDials).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

});

describe('interceptors that fail, hold or throw', () => {
  it('an outbound interceptor that throws fails the call with what it threw, cancels what it started and stops the deadline', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    server.handle('add', ({ a, b }: { a: number; b: number }) => a + b);
    let served = 0;
    server.handleStream('count', async function* (n: number) {
      served++;
      for (let i = 0; i < n; i++) yield i;
    });
    let throwBefore = true;
    const buggy: Interceptor = (next) => (call, handler) => {
      if (throwBefore) throw new Error('interceptor bug before next');
      next(call, handler);
      throw new Error('interceptor bug after next');
    };
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [buggy], defaultTimeoutMs: 60_000 });
    agents.push(server, client);
    const address = server.addresses[0]!;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const before = vi.getTimerCount();
    const sent = client.send(address, 'add', { a: 1, b: 2 }); // must not throw: a rejected promise
    await expect(sent).rejects.toMatchObject({ code: 'UNKNOWN', message: 'interceptor bug before next' });
    expect(vi.getTimerCount()).toBe(before); // the call's 60 s deadline is not left armed
    vi.useRealTimers();
    throwBefore = false;
    // Thrown after the attempt started: the call fails with the throw, and the attempt in flight is cancelled.
    await expect(client.send(address, 'add', { a: 1, b: 2 })).rejects.toMatchObject({ message: 'interceptor bug after next' });
    await expect(client.stream(address, 'count', 3).next()).rejects.toMatchObject({ message: 'interceptor bug after next' });
    expect(served).toBeLessThanOrEqual(1);
  });

  it("an interceptor that throws when the one before it dispatches later (a rate limit's wait, a retry) fails its call, not the process", async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    server.handle('add', ({ a, b }: { a: number; b: number }) => a + b);
    const buggy: Interceptor = () => () => {
      throw new Error('interceptor bug');
    };
    let attempts = 0;
    // Fails its first attempt as unreachable (worth a retry), throws in the second: the retry's timer calls it.
    const flaky: Interceptor = () => (_call, handler) => {
      if (++attempts === 1) return handler.onError(new AgentError('UNAVAILABLE', 'not yet'));
      throw new Error('interceptor bug on retry');
    };
    const limited = await createAgent({ channels: [memoryTransport(network)], interceptors: [rateLimit({ global: { ratePerSecond: 1, burst: 1 } }), buggy] });
    const retried = await createAgent({ channels: [memoryTransport(network)], interceptors: [retry({ maxAttempts: 2, baseDelayMs: 100 }), flaky] });
    agents.push(server, limited, retried);
    const address = server.addresses[0]!;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const before = vi.getTimerCount();
      await expect(limited.send(address, 'add', { a: 1, b: 2 })).rejects.toMatchObject({ message: 'interceptor bug' });
      const waited = limited.send(address, 'add', { a: 1, b: 2 }); // waits ~1 s for the rate limit's token
      const outcome = waited.then(() => 'answered', (error: AgentError) => error);
      vi.advanceTimersByTime(1000); // threw out of the timer's callback before: an uncaught exception
      expect(await outcome).toMatchObject({ code: 'UNKNOWN', message: 'interceptor bug' });
      const again = retried.send(address, 'add', { a: 1, b: 2 }, { idempotent: true });
      const retriedOutcome = again.then(() => 'answered', (error: AgentError) => error);
      vi.advanceTimersByTime(100);
      expect(await retriedOutcome).toMatchObject({ code: 'UNKNOWN', message: 'interceptor bug on retry' });
      expect(attempts).toBe(2);
      expect(vi.getTimerCount()).toBe(before); // no deadline left armed
    } finally {
      vi.useRealTimers();
    }
  });

  it('an interceptor that throws after starting its attempt, called at once, is reported once to the interceptors before it', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    server.handle('slow', () => new Promise(() => undefined));
    const seen: string[] = [];
    const tap: Interceptor = (next) => (call, handler) => next(call, tapHandler(handler, { onError: (error) => void seen.push(error.message) }));
    const buggy: Interceptor = (next) => (call, handler) => {
      next(call, handler);
      throw new Error('interceptor bug after next');
    };
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [tap, buggy] });
    agents.push(server, client);
    await expect(client.send(server.addresses[0]!, 'slow', null)).rejects.toMatchObject({ message: 'interceptor bug after next' });
    await vi.waitFor(() => expect(seen).toHaveLength(1)); // the cancelled attempt's failure, through the tap
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual(['interceptor bug after next']);
  });

  it('an interceptor that throws after starting its attempt, called later by a rate limit, is reported once to the interceptors before it', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    server.handle('slow', () => new Promise(() => undefined));
    const seen: string[] = [];
    const tap: Interceptor = (next) => (call, handler) => next(call, tapHandler(handler, { onError: (error) => void seen.push(error.message) }));
    let calls = 0;
    const buggy: Interceptor = (next) => (call, handler) => {
      next(call, handler);
      if (++calls === 2) throw new Error('interceptor bug after next');
    };
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [tap, rateLimit({ global: { ratePerSecond: 1, burst: 1 } }), buggy] });
    agents.push(server, client);
    const address = server.addresses[0]!;
    void client.send(address, 'slow', null).catch(() => undefined); // takes the one token; never answered
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const waited = client.send(address, 'slow', null).then(() => 'answered', (error: AgentError) => error.message);
    vi.advanceTimersByTime(1000); // the rate limit lets it through: buggy starts the attempt, then throws
    vi.useRealTimers();
    expect(await waited).toBe('interceptor bug after next');
    // Both reports (the throw, and the cancelled attempt's) came before the call settled: the tap heard one. Before,
    // two (a breaker before it counted two failures).
    expect(seen).toEqual(['interceptor bug after next']);
  });

  it('an async interceptor that starts its attempt and then rejects is reported once to the interceptors before it', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    server.handle('slow', () => new Promise(() => undefined));
    const seen: string[] = [];
    const tap: Interceptor = (next) => (call, handler) => next(call, tapHandler(handler, { onError: (error) => void seen.push(error.message) }));
    let rejectAfterStart: (error: Error) => void = () => undefined;
    // `Dispatch` allows an async interceptor: it starts the attempt, then its promise rejects (a failed audit write).
    const rejecting: Interceptor = (next) => async (call, handler) => {
      next(call, handler);
      await new Promise<never>((_, reject) => (rejectAfterStart = reject));
    };
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [tap, rejecting] });
    agents.push(server, client);
    const outcome = client.send(server.addresses[0]!, 'slow', null).then(() => 'answered', (error: AgentError) => error.message);
    await new Promise((resolve) => setImmediate(resolve)); // the attempt's request is out
    rejectAfterStart(new Error('audit write failed'));
    expect(await outcome).toBe('audit write failed');
    await new Promise((resolve) => setImmediate(resolve));
    // The rejection and the cancelled attempt's failure both reach the tap's handler: it hears one. Before, two.
    expect(seen).toEqual(['audit write failed']);
  });

  /**
   * A server counting what it serves, and a client whose interceptor holds every call until `release` (a token
   * fetch that hangs), behind a tap that records the error codes the interceptors before it hear.
   */
  async function heldCalls() {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    const counts = { served: 0 };
    server.handle('add', ({ a, b }: { a: number; b: number }) => (counts.served++, a + b));
    server.handleStream('count', async function* (n: number) {
      counts.served++;
      for (let i = 0; i < n; i++) yield i;
    });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const holding: Interceptor = (next) => async (call, handler) => {
      await held;
      next(call, handler);
    };
    const seen: string[] = [];
    const tap: Interceptor = (next) => (call, handler) => next(call, tapHandler(handler, { onError: (error) => void seen.push(error.code) }));
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [tap, holding] });
    agents.push(server, client);
    return { client, address: server.addresses[0]!, counts, release, seen };
  }

  /** What a call came to so far: its value, its error code, or 'pending'. */
  function outcomeOf(call: Promise<unknown>): { value: unknown } {
    const outcome = { value: 'pending' as unknown };
    void call.then((value) => (outcome.value = value), (error: AgentError) => (outcome.value = error.code));
    return outcome;
  }

  const turn = () => new Promise((resolve) => setImmediate(resolve));

  it("a call's deadline and signal end it while an interceptor still holds it; what it starts later is cancelled at once", async () => {
    // The call's own deadline and signal must end it on time. Before, the call waited for the interceptor.
    const { client, address, counts, release, seen } = await heldCalls();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const before = vi.getTimerCount();
      const sent = outcomeOf(client.send(address, 'add', { a: 1, b: 2 }, { timeoutMs: 50 }));
      const cancelled = new AbortController();
      const streamed = outcomeOf(client.stream(address, 'count', 3, { signal: cancelled.signal })[Symbol.asyncIterator]().next());
      vi.advanceTimersByTime(50);
      cancelled.abort();
      await turn();
      expect([sent.value, streamed.value]).toEqual(['DEADLINE_EXCEEDED', 'CANCELLED']);
      expect(vi.getTimerCount()).toBe(before); // the deadline's timer is gone
      release(); // the interceptor lets both calls through late: their attempts end before sending anything
      await vi.waitFor(() => expect(seen.sort()).toEqual(['CANCELLED', 'DEADLINE_EXCEEDED'])); // the tap hears each once
      await turn();
      expect(counts.served).toBe(0);
      expect([sent.value, streamed.value]).toEqual(['DEADLINE_EXCEEDED', 'CANCELLED']);
    } finally {
      vi.useRealTimers();
    }
    expect(await client.send(address, 'add', { a: 1, b: 2 })).toBe(3);
  });

  it('a call whose signal was aborted before it started ends at once while an interceptor holds it', async () => {
    // The abort comes before the agent's handler of the call exists (OutboundCall's constructor).
    const { client, address, counts, release, seen } = await heldCalls();
    const sent = outcomeOf(client.send(address, 'add', { a: 1, b: 2 }, { signal: AbortSignal.abort() }));
    const streamed = outcomeOf(client.stream(address, 'add', { a: 1, b: 2 }, { signal: AbortSignal.abort() })[Symbol.asyncIterator]().next());
    await turn();
    expect([sent.value, streamed.value]).toEqual(['CANCELLED', 'CANCELLED']);
    release(); // let through late, the attempts end before sending anything
    await vi.waitFor(() => expect(seen).toEqual(['CANCELLED', 'CANCELLED'])); // the tap hears each once
    await turn();
    expect(counts.served).toBe(0);
    expect([sent.value, streamed.value]).toEqual(['CANCELLED', 'CANCELLED']);
  });

  it('an async interceptor that rejects fails its call, outbound and inbound, not the process', async () => {
    const network = new Map<string, ListenContext>();
    // Async interceptors type-check as a Dispatch; a rejection was unhandled (the process ends) and the call hung.
    const checking: Interceptor = (next) => async (call, handler) => {
      await Promise.resolve();
      if (call.method === 'refused') throw new AgentError('PERMISSION_DENIED', `no ${call.method} for you`);
      if (call.method === 'buggy') throw new Error('async interceptor bug');
      next(call, handler);
    };
    const tap: Interceptor = (next) => (call, handler) => next(call, handler);
    const server = await createAgent({ channels: [memoryTransport(network, 'server')], inboundInterceptors: [tap, checking] });
    for (const method of ['add', 'refused', 'buggy']) server.handle(method, ({ a, b }: { a: number; b: number }) => a + b);
    const client = await createAgent({ channels: [memoryTransport(network)], interceptors: [checking] });
    const plain = await createAgent({ channels: [memoryTransport(network)] });
    agents.push(server, client, plain);
    const address = server.addresses[0]!;
    const outcome = (call: Promise<unknown>) => call.then((value) => value, (error: AgentError) => [error.code, error.message]);
    // Outbound: the deadline (1 s) is what ended these calls before, if the process lived that long.
    expect(await outcome(client.send(address, 'refused', { a: 1, b: 2 }, { timeoutMs: 1000 }))).toEqual(['PERMISSION_DENIED', 'no refused for you']);
    expect(await outcome(client.send(address, 'buggy', { a: 1, b: 2 }, { timeoutMs: 1000 }))).toEqual(['UNKNOWN', 'async interceptor bug']);
    // Inbound, behind another interceptor: the caller hears why.
    expect(await outcome(plain.send(address, 'refused', { a: 1, b: 2 }, { timeoutMs: 1000 }))).toEqual(['PERMISSION_DENIED', 'no refused for you']);
    expect(await outcome(plain.send(address, 'buggy', { a: 1, b: 2 }, { timeoutMs: 1000 }))).toEqual(['HANDLER_ERROR', 'async interceptor bug']);
    expect(await plain.send(address, 'add', { a: 1, b: 2 })).toBe(3);
  });

  it("an inbound interceptor that fails after the handler's reply ended loses none of the reply", async () => {
    const network = new Map<string, ListenContext>();
    let ended!: () => void;
    const replyEnded = new Promise<void>((resolve) => (ended = resolve));
    let failedLate = false;
    // Passes the call on, then fails once the handler's reply has ended (a bug, or an audit step that throws).
    const late: Interceptor = (next) => async (call, handler) => {
      next(call, tapHandler(handler, { onEnd: ended }));
      await replyEnded;
      failedLate = true;
      throw new Error('late interceptor failure');
    };
    const server = await createAgent({ channels: [memoryTransport(network, 'server')], inboundInterceptors: [late] });
    server.handleStream('count', async function* (n: number) {
      for (let i = 0; i < n; i++) yield i;
    });
    const client = await createAgent({ channels: [memoryTransport(network)] });
    agents.push(server, client);
    const items = client.stream<number>(server.addresses[0]!, 'count', 200)[Symbol.asyncIterator]();
    const received = [(await items.next()).value];
    await vi.waitFor(() => expect(failedLate).toBe(true)); // the rest are written, and unread
    await new Promise((resolve) => setImmediate(resolve));
    for (let next = await items.next(); !next.done; next = await items.next()) received.push(next.value);
    // Before, the late failure reset the finished stream: the caller lost what it had not read yet.
    expect(received).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  it('an inbound interceptor that throws when a rate limit before it lets the call through later fails that call, not the server', async () => {
    const network = new Map<string, ListenContext>();
    let calls = 0;
    const buggy: Interceptor = (next) => (call, handler) => {
      if (calls++ === 1) throw new Error('inbound interceptor bug');
      next(call, handler);
    };
    const server = await createAgent({ channels: [memoryTransport(network, 'server')], inboundInterceptors: [rateLimit({ global: { ratePerSecond: 1, burst: 1 } }), buggy] });
    server.handle('add', ({ a, b }: { a: number; b: number }) => a + b);
    const client = await createAgent({ channels: [memoryTransport(network)] });
    agents.push(server, client);
    const address = server.addresses[0]!;
    expect(await client.send(address, 'add', { a: 1, b: 2 })).toBe(3);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const waited = client.send(address, 'add', { a: 2, b: 2 }).then(() => 'answered', (error: AgentError) => error);
      await vi.waitFor(() => expect(vi.getTimerCount()).toBeGreaterThan(1)); // the server's rate limit waits for a token
      vi.advanceTimersByTime(1000); // threw out of the rate limit's timer before: an uncaught exception in the server
      expect(await waited).toMatchObject({ code: 'HANDLER_ERROR', message: 'inbound interceptor bug' });
    } finally {
      vi.useRealTimers();
    }
  });
});

