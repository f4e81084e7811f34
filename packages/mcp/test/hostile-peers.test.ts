import { EventEmitter, once } from 'node:events';
import { AgentError, createAgent, type Agent } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CreateMessageRequestSchema, LATEST_PROTOCOL_VERSION, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentlinkClientTransport,
  MAX_MCP_JSON_CONTAINERS,
  MAX_MCP_JSON_DEPTH,
  MAX_MCP_REQUESTS_IN_FLIGHT,
  TOO_MANY_MCP_REQUESTS,
  MAX_UNSENT_MCP_BYTES,
  MAX_UNSENT_MCP_MESSAGES,
  serveMcp,
} from '../src/index.js';
import { decodeMessage } from '../src/json-rpc.js';
import { exampleServer } from './mcp-fixtures.js';

/** A JSON-RPC ping whose id is `size` characters: its answer echoes the id, so each answer is as large as the ask. */
function bigPing(n: number, size: number): string {
  return JSON.stringify({ jsonrpc: '2.0', id: `${n}:`.padEnd(size, 'x'), method: 'ping' });
}

const PING_SIZE = 64 * 1024;

/**
 * A hand-written MCP server for `method`: answers the client's initialize, hands every later message of the client
 * to `heard` (when given; otherwise it never reads again), then sends what `asks` yields and holds the session open.
 */
function askingServer(server: Agent, method: string, name: string, asks: () => Iterable<string>, heard?: (message: { id?: unknown; error?: { code: number }; result?: unknown }) => void): void {
  server.handleDuplex<string, string>(method, async function* (incoming) {
    const reader = incoming[Symbol.asyncIterator]();
    const initialize = JSON.parse((await reader.next()).value as string) as { id: number };
    yield JSON.stringify({
      jsonrpc: '2.0',
      id: initialize.id,
      result: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, serverInfo: { name, version: '1' } },
    });
    if (heard) {
      void (async () => {
        for (let next = await reader.next(); !next.done; next = await reader.next()) heard(JSON.parse(next.value) as never);
      })().catch(() => undefined);
    }
    yield* asks();
    await new Promise(() => undefined);
  });
}
/**
 * What the server may hold unsent: the bound, plus the answers to the requests it read before those answers were
 * queued (at most core's read-ahead, 256 KiB, for a handler that answers at once like ping's), plus one message.
 */
const SERVER_HOLDS_AT_MOST = MAX_UNSENT_MCP_BYTES + 256 * 1024 + 2 * PING_SIZE;

describe('MCP sessions against hostile peers (ws, loopback)', () => {
  let server: Agent;
  let caller: Agent;
  const events = new EventEmitter();
  /** The server session's answers not yet taken by the stream, in characters (observed on its transport). */
  let unsent = 0;
  let peakUnsent = 0;

  beforeAll(async () => {
    server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    serveMcp(server, () => {
      const mcp = exampleServer(events);
      return {
        async connect(transport: Transport) {
          const send = transport.send.bind(transport);
          transport.send = async (message: JSONRPCMessage) => {
            const size = JSON.stringify(message).length;
            unsent += size;
            peakUnsent = Math.max(peakUnsent, unsent);
            try {
              await send(message);
            } finally {
              unsent -= size;
            }
          };
          await mcp.connect(transport);
        },
        close: () => mcp.close(),
      };
    });
    caller = await createAgent({ channels: [webSocket()] });
  });

  afterAll(async () => {
    await caller?.close();
    await server?.close();
  });

  it('a client that sends requests and never reads the answers: the server stops reading, it does not queue every answer', async () => {
    unsent = 0;
    peakUnsent = 0;
    const count = 400; // 25 MiB of asks, each answered with as much
    // The deadline ends the stalled session; what is asserted is what the server held meanwhile, not a time.
    const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp', { timeoutMs: 3_000 });
    const sends = Array.from({ length: count }, (_, n) => call.send(bigPing(n, PING_SIZE)));
    const outcomes = await Promise.allSettled(sends);
    const sent = outcomes.filter((o) => o.status === 'fulfilled').length;
    call.abort();
    // Before: the server read all 400 and queued every answer (~24 MiB behind the stream's window).
    expect(peakUnsent).toBeLessThanOrEqual(SERVER_HOLDS_AT_MOST);
    expect(sent).toBeLessThan(count);
  });

  it('a slow but honest client gets every answer: reading resumes as the answers leave', async () => {
    unsent = 0;
    peakUnsent = 0;
    const count = 200;
    const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp');
    const sends = Array.from({ length: count }, (_, n) => call.send(bigPing(n, PING_SIZE)));
    const ids = new Set<string>();
    for await (const reply of call) {
      ids.add((JSON.parse(reply) as { id: string }).id.split(':')[0]!);
      if (ids.size === count) break;
    }
    await Promise.all(sends);
    expect(ids.size).toBe(count);
    expect(peakUnsent).toBeLessThanOrEqual(SERVER_HOLDS_AT_MOST);
  });

  it('a server that sends requests and never reads the answers: the client closes the session (RESOURCE_EXHAUSTED)', async () => {
    const flood = 400;
    const marker = new EventEmitter();
    // Never reads again: the client's answers to these pings pile up on its side.
    askingServer(server, 'mcp-hostile', 'hostile', function* () {
      for (let n = 0; n < flood; n++) yield bigPing(n, PING_SIZE);
      marker.emit('flooded');
    });
    const client = new Client({ name: 'victim', version: '1.0.0' });
    const transport = new AgentlinkClientTransport(caller, server.addresses[0]!, { method: 'mcp-hostile' });
    const errors: Error[] = [];
    const closed = new Promise<'closed'>((resolve) => {
      client.onclose = () => resolve('closed');
    });
    client.onerror = (error) => errors.push(error);
    await client.connect(transport);
    // Before: the client answered all 400 (25 MiB waiting for a server that never reads) and stayed open.
    const outcome = await Promise.race([closed, once(marker, 'flooded').then(() => 'flooded' as const)]);
    expect(outcome).toBe('closed');
    const exhausted = errors.find((e) => e instanceof AgentError && e.code === 'RESOURCE_EXHAUSTED');
    expect(exhausted?.message).toContain(String(MAX_UNSENT_MCP_MESSAGES));
  });

  it('messages past the JSON bounds (nesting, arrays and objects) are refused before they are parsed; the session goes on', async () => {
    const ping = (id: number, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping', params: { flood: params } });
    const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp');
    // 1: 300,000 empty arrays (900 KB; each a JS array once parsed). 2: 300 nested ones. 3: an honest ping.
    await call.send(ping(1, JSON.parse(`[${'[],'.repeat(MAX_MCP_JSON_CONTAINERS + 1000)}[]]`)));
    await call.send(ping(2, JSON.parse(`${'['.repeat(MAX_MCP_JSON_DEPTH + 44)}${']'.repeat(MAX_MCP_JSON_DEPTH + 44)}`)));
    await call.send(ping(3, 'honest'));
    const answered: number[] = [];
    for await (const reply of call) {
      answered.push((JSON.parse(reply) as { id: number }).id);
      if (answered.includes(3)) break;
    }
    // Before: all three were parsed and answered.
    expect(answered).toEqual([3]);
  });
});

describe('MCP requests in flight (ws, loopback)', () => {
  let server: Agent;
  let caller: Agent;
  const events = new EventEmitter();
  let waiting = 0;
  events.on('waiting', () => waiting++);

  beforeAll(async () => {
    server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    serveMcp(server, () => exampleServer(events));
    caller = await createAgent({ channels: [webSocket()] });
  });

  afterAll(async () => {
    await caller?.close();
    await server?.close();
  });

  it('a client calling a tool that never ends, over and over: the server works on at most the bound, the rest are answered at once', async () => {
    const extra = 100;
    const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp');
    const initialize = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'flood', version: '1' } };
    const replies = call[Symbol.asyncIterator]();
    await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: initialize }));
    expect(JSON.parse((await replies.next()).value as string)).toMatchObject({ id: 'init' }); // answered: not in flight
    await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    for (let n = 0; n < MAX_MCP_REQUESTS_IN_FLIGHT + extra; n++) {
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'wait-for-cancel', arguments: {} } }));
    }
    // One cancelled makes room for one more (the late call); then a ping, refused too, as the bound is reached again.
    const cancelled = once(events, 'cancelled');
    await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'enough' } }));
    await cancelled; // the tool saw its abort and returns: its slot is free once it did (the SDK ignores a cancel of id 0)
    await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'late', method: 'tools/call', params: { name: 'wait-for-cancel', arguments: {} } }));
    await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'ping' }));
    const refused: unknown[] = [];
    for (let reply = await replies.next(); !reply.done; reply = await replies.next()) {
      const message = JSON.parse(reply.value) as { id: unknown; error?: { code: number } };
      if (message.error?.code === TOO_MANY_MCP_REQUESTS) refused.push(message.id);
      if (message.id === 'last') break;
    }
    call.abort();
    // Before: all 1,124 reached the tool (each a handler held until the session ends) and none was refused.
    expect(refused).toEqual([...Array.from({ length: extra }, (_, n) => MAX_MCP_REQUESTS_IN_FLIGHT + n), 'last']);
    expect(waiting).toBe(MAX_MCP_REQUESTS_IN_FLIGHT + 1); // the late one took the cancelled one's place
  });
});

/**
 * A server whose one tool, `stubborn`, ignores its abort and runs until `release()`; `allRunning` emits 'full' when
 * MAX_MCP_REQUESTS_IN_FLIGHT of them run at once.
 */
function serveStubbornTools(server: Agent): { readonly running: number; allRunning: EventEmitter; release: () => void } {
  let running = 0;
  const allRunning = new EventEmitter();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  serveMcp(server, () => {
    const mcp = new McpServer({ name: 'stubborn', version: '1.0.0' });
    mcp.registerTool('stubborn', { description: 'ignores its abort signal' }, async () => {
      if (++running === MAX_MCP_REQUESTS_IN_FLIGHT) allRunning.emit('full');
      await gate;
      running--;
      return { content: [] };
    });
    return mcp;
  });
  return { get running() { return running; }, allRunning, release };
}

describe('MCP requests cancelled while their tool runs on (ws, loopback)', () => {
  it('a client cancelling and calling again a tool that ignores its cancellation: each call keeps its slot until the tool returns', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const caller = await createAgent({ channels: [webSocket()] });
    const tools = serveStubbornTools(server);
    const { allRunning, release } = tools;
    try {
      const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp');
      const replies = call[Symbol.asyncIterator]();
      const initialize = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'canceller', version: '1' } };
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: initialize }));
      expect(JSON.parse((await replies.next()).value as string)).toMatchObject({ id: 'init' });
      await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const full = once(allRunning, 'full');
      // Ids from 1: the SDK ignores a cancel of id 0 (and answers it when its tool returns).
      for (let n = 1; n <= MAX_MCP_REQUESTS_IN_FLIGHT; n++) {
        await call.send(JSON.stringify({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'stubborn', arguments: {} } }));
      }
      await full;
      for (let n = 1; n <= MAX_MCP_REQUESTS_IN_FLIGHT; n++) {
        await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: n, reason: 'again' } }));
      }
      // Every call was cancelled, and every tool still runs: the next call is answered at once with the bound's error.
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'again', method: 'tools/call', params: { name: 'stubborn', arguments: {} } }));
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'probe', method: 'ping' }));
      // Before: the cancels freed every slot while the tools ran on, so this call started a 1,025th and the ping was answered.
      expect(JSON.parse((await replies.next()).value as string)).toMatchObject({ id: 'again', error: { code: TOO_MANY_MCP_REQUESTS } });
      expect(JSON.parse((await replies.next()).value as string)).toMatchObject({ id: 'probe', error: { code: TOO_MANY_MCP_REQUESTS } });
      expect(tools.running).toBe(MAX_MCP_REQUESTS_IN_FLIGHT);
      release(); // the tools return (the SDK answers none: they were cancelled), and their slots are free
      await expect.poll(() => tools.running).toBe(0);
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'after', method: 'ping' }));
      expect(JSON.parse((await replies.next()).value as string)).toEqual({ jsonrpc: '2.0', id: 'after', result: {} });
      call.abort();
    } finally {
      release();
      await caller.close();
      await server.close();
    }
  });
});

describe('MCP tools that outlive their session (ws, loopback)', () => {
  it("a tool that ignores its abort keeps its peer's slot after the session closed: the peer's next session gets no more until it returns", async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const caller = await createAgent({ channels: [webSocket()] });
    const other = await createAgent({ channels: [webSocket()] });
    const tools = serveStubbornTools(server);
    const { allRunning, release } = tools;
    const initialize = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'reopener', version: '1' } };
    /** A new session of `agent`: its answer to initialize, and the session. */
    const open = async (agent: Agent) => {
      const call = agent.duplex<string, string>(server.addresses[0]!, 'mcp');
      const replies = call[Symbol.asyncIterator]();
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: initialize }));
      return { call, replies, answer: JSON.parse((await replies.next()).value as string) as { id: unknown; error?: { code: number } } };
    };
    try {
      const first = await open(caller);
      expect(first.answer).toMatchObject({ id: 'init', result: expect.anything() });
      await first.call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const full = once(allRunning, 'full');
      for (let n = 1; n <= MAX_MCP_REQUESTS_IN_FLIGHT; n++) {
        await first.call.send(JSON.stringify({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'stubborn', arguments: {} } }));
      }
      await full;
      first.call.abort(); // the session ends; the SDK aborts the tools, which run on

      // Before: a new session of the same peer started afresh, and could start 1,024 more such tools each time.
      const second = await open(caller);
      expect(second.answer).toMatchObject({ id: 'init', error: { code: TOO_MANY_MCP_REQUESTS } });
      second.call.abort();
      const another = await open(other); // another peer's requests are its own
      expect(another.answer).toMatchObject({ id: 'init', result: expect.anything() });
      another.call.abort();
      expect(tools.running).toBe(MAX_MCP_REQUESTS_IN_FLIGHT);

      release(); // the tools return: the peer's slots are free
      await expect.poll(() => tools.running).toBe(0);
      const third = await open(caller);
      expect(third.answer).toMatchObject({ id: 'init', result: expect.anything() });
      third.call.abort();
    } finally {
      release();
      await Promise.all([caller.close(), other.close()]);
      await server.close();
    }
  });
});

describe('MCP requests with an id already in flight (ws, loopback)', () => {
  // The SDK keys a session's handlers by request id, and the bound counted handlers per id: with two requests of
  // one id in flight, a cancel aborted the later one (a tool that ignores it runs on) while the earlier one was
  // answered; its answer and its handler's end both gave a slot back, and the tool still running held none. One
  // such round per stubborn tool, and a client ran as many as it liked past MAX_MCP_REQUESTS_IN_FLIGHT.
  it('is refused: a cancel and an answer cannot both give back the slot of a tool that runs on', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const caller = await createAgent({ channels: [webSocket()] });
    let running = 0;
    const events = new EventEmitter();
    let release!: () => void;
    const stubbornGate = new Promise<void>((resolve) => (release = resolve));
    let finishGated!: () => void;
    const gatedGate = new Promise<void>((resolve) => (finishGated = resolve));
    serveMcp(server, () => {
      const mcp = new McpServer({ name: 'stubborn', version: '1.0.0' });
      mcp.registerTool('stubborn', { description: 'ignores its abort signal' }, async (extra) => {
        extra.signal.addEventListener('abort', () => events.emit('aborted'));
        events.emit('running', ++running);
        await stubbornGate;
        running--;
        return { content: [] };
      });
      mcp.registerTool('gated', { description: 'returns when the test says, abort or not' }, async (extra) => {
        extra.signal.addEventListener('abort', () => events.emit('aborted'));
        events.emit('gated');
        await gatedGate;
        events.emit('gated-done');
        return { content: [] };
      });
      return mcp;
    });
    const call = caller.duplex<string, string>(server.addresses[0]!, 'mcp');
    const answers: Array<{ id?: unknown; error?: { code: number } }> = [];
    void (async () => {
      for await (const text of call) {
        const message = JSON.parse(text) as { id?: unknown; error?: { code: number } };
        answers.push(message);
        events.emit('answer', message);
      }
    })().catch(() => undefined);
    const answered = (id: unknown) => new Promise<{ error?: { code: number } }>((resolve) => events.on('answer', (a: { id?: unknown; error?: { code: number } }) => a.id === id && resolve(a)));
    const tool = (id: string | number, name: string) => call.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } }));
    const until = (count: number) => new Promise<void>((resolve) => (running >= count ? resolve() : events.on('running', (n: number) => n >= count && resolve())));
    try {
      const init = answered('init');
      await call.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'reuser', version: '1' } } }));
      await init;
      await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const stubborn = MAX_MCP_REQUESTS_IN_FLIGHT - 2;
      for (let n = 1; n <= stubborn; n++) await tool(n, 'stubborn');
      await until(stubborn);

      const gated = once(events, 'gated');
      await tool('x', 'gated');
      await gated;
      // The same id while the first runs: before, a stubborn tool ran for it; now it is refused.
      const secondX = Promise.race([until(stubborn + 1), answered('x')]);
      await tool('x', 'stubborn');
      await secondX;
      const aborted = once(events, 'aborted');
      await call.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'x' } }));
      await aborted; // the SDK aborted the 'x' it knows last (the stubborn one before, which ran on)
      const done = once(events, 'gated-done');
      finishGated(); // the first 'x' returns (answered before: the SDK had not aborted it)
      await done;
      const last = answered('w');
      for (const id of ['y', 'z', 'w']) await tool(id, 'stubborn');
      expect((await last).error?.code).toBe(TOO_MANY_MCP_REQUESTS);
      // Before: 1,025 (the second 'x', 'y' and 'z' all ran: the first 'x' gave its slot back twice).
      expect(running).toBe(MAX_MCP_REQUESTS_IN_FLIGHT);
    } finally {
      release();
      call.abort();
      await caller.close();
      await server.close();
    }
  });
});

describe('MCP requests in flight on the client', () => {
  it('a server asking for sampling that never ends, over and over: the client works on at most the bound, the rest are answered at once', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const caller = await createAgent({ channels: [webSocket()] });
    try {
      const extra = 100;
      const refused: unknown[] = [];
      const done = new EventEmitter();
      const params = { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 1 };
      askingServer(
        server,
        'mcp',
        'asking',
        function* () {
          for (let n = 0; n < MAX_MCP_REQUESTS_IN_FLIGHT + extra; n++) yield JSON.stringify({ jsonrpc: '2.0', id: n, method: 'sampling/createMessage', params });
          yield JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'ping' });
        },
        (message) => {
          if (message.error?.code === TOO_MANY_MCP_REQUESTS) refused.push(message.id);
          if (message.id === 'last') done.emit('done');
        },
      );
      const client = new Client({ name: 'sampler', version: '1.0.0' }, { capabilities: { sampling: {} } });
      let sampling = 0;
      client.setRequestHandler(CreateMessageRequestSchema, () => {
        sampling++;
        return new Promise(() => undefined); // a human who never answers
      });
      const finished = once(done, 'done');
      await client.connect(new AgentlinkClientTransport(caller, server.addresses[0]!));
      await finished;
      // Before: all 1,124 reached the sampling handler and none was refused (the ping was answered).
      expect(refused).toEqual([...Array.from({ length: extra }, (_, n) => MAX_MCP_REQUESTS_IN_FLIGHT + n), 'last']);
      expect(sampling).toBe(MAX_MCP_REQUESTS_IN_FLIGHT);
      await client.close();
    } finally {
      await caller.close();
      await server.close();
    }
  });
});

describe('a large answer to an honest server', () => {
  it('a client answers a sampling request with more than MAX_UNSENT_MCP_BYTES: the server reads it, the session stays open', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const caller = await createAgent({ channels: [webSocket()] });
    try {
      const answers = new EventEmitter();
      const params = { messages: [{ role: 'user', content: { type: 'text', text: 'write a long story' } }], maxTokens: 1_000_000 };
      askingServer(
        server,
        'mcp',
        'asking',
        function* () {
          yield JSON.stringify({ jsonrpc: '2.0', id: 'sample', method: 'sampling/createMessage', params });
        },
        (message) => {
          if (message.id === 'sample') answers.emit('answer', message);
        },
      );
      const client = new Client({ name: 'sampler', version: '1.0.0' }, { capabilities: { sampling: {} } });
      const story = 'x'.repeat(MAX_UNSENT_MCP_BYTES + 1024); // one answer, read at once by the server
      client.setRequestHandler(CreateMessageRequestSchema, () => ({ role: 'assistant', content: { type: 'text', text: story }, model: 'm' }));
      const errors: Error[] = [];
      client.onerror = (error) => errors.push(error);
      const closed = new Promise<'closed'>((resolve) => {
        client.onclose = () => resolve('closed');
      });
      const answered = once(answers, 'answer').then(([answer]) => answer as { result: { content: { text: string } } });
      await client.connect(new AgentlinkClientTransport(caller, server.addresses[0]!));
      // Before: the client counted this one answer as over the bound of unsent answers and closed the session.
      const outcome = await Promise.race([closed, answered]);
      expect(outcome).not.toBe('closed');
      expect((await answered).result.content.text).toHaveLength(story.length);
      expect(errors).toEqual([]);
      await client.close();
    } finally {
      await caller.close();
      await server.close();
    }
  });
});

describe('the JSON shape walk', () => {
  it('refuses past the depth and container bounds, counts no bracket inside a string, accepts up to the bounds', () => {
    const message = (params: string) => `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":${params}}}`;
    // The message's own object and params take two levels and two containers.
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    expect(decodeMessage(message(nested(MAX_MCP_JSON_DEPTH - 2)))).toMatchObject({ method: 'ping' });
    expect(() => decodeMessage(message(nested(MAX_MCP_JSON_DEPTH - 1)))).toThrow(/nests deeper than 256/);
    const flat = (count: number) => `[${Array.from({ length: count }, () => '{}').join(',')}]`;
    expect(decodeMessage(message(flat(MAX_MCP_JSON_CONTAINERS - 3)))).toMatchObject({ method: 'ping' });
    expect(() => decodeMessage(message(flat(MAX_MCP_JSON_CONTAINERS - 2)))).toThrow(/more than 262144/);
    // Brackets and escaped quotes inside strings are text.
    const text = JSON.stringify(`${'[{'.repeat(MAX_MCP_JSON_CONTAINERS)}"\\"`);
    expect(decodeMessage(message(text))).toMatchObject({ method: 'ping' });
  });
});
