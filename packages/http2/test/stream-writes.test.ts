import { once } from 'node:events';
import { connect, createServer, type ClientHttp2Session, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { AgentError } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { Http2ChannelStream, STREAM_BUFFER_LIMIT, TURN_SEND_BYTES } from '../src/http2-stream.js';
import { OutboundBudget } from '../src/outbound-budget.js';

// A plain node:http2 pair (h2c on loopback): the wrapper's writes are node's, whatever the TLS around them.
let server: Http2Server | undefined;
let client: ClientHttp2Session | undefined;
afterEach(() => {
  client?.destroy();
  server?.close();
  client = server = undefined;
});

/** A server stream wrapped as the channel wraps it, for a client that gives it `windowSize` bytes of credit. */
async function wrappedServerStream(windowSize: number): Promise<{
  wrapper: Http2ChannelStream;
  node: ServerHttp2Stream;
  budget: OutboundBudget;
  response: Promise<IncomingHttpHeaders>;
  body: () => Promise<Buffer>;
}> {
  server = createServer();
  const streams = once(server, 'stream') as Promise<[ServerHttp2Stream]>;
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { settings: { initialWindowSize: windowSize } });
  const request = client.request({ ':method': 'POST', ':path': '/agentlink' });
  request.write('x');
  const [node] = await streams;
  const budget = new OutboundBudget(16 * 1024 * 1024);
  const wrapper = new Http2ChannelStream(node, () => new AgentError('UNAVAILABLE', 'gone'), () => undefined, budget);
  wrapper.respondWith = { ':status': 200 };
  const response = once(request, 'response').then(([headers]) => headers as IncomingHttpHeaders);
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = once(request, 'end');
  return { wrapper, node, budget, response, body: async () => (await ended, Buffer.concat(chunks)) };
}

/** What the wrapper hands node's stream, one entry per write node takes in (`_write` or `_writev`): the byte counts. */
function recordHandOffs(node: ServerHttp2Stream): number[][] {
  const handed: number[][] = [];
  const stream = node as unknown as {
    _write(chunk: Buffer, encoding: BufferEncoding, done: (error?: Error | null) => void): void;
    _writev(chunks: Array<{ chunk: Buffer }>, done: (error?: Error | null) => void): void;
  };
  const write = stream._write;
  const writev = stream._writev;
  stream._write = function (chunk, encoding, done) {
    handed.push([chunk.length]);
    write.call(this, chunk, encoding, done);
  };
  stream._writev = function (chunks, done) {
    handed.push(chunks.map(({ chunk }) => chunk.length));
    writev.call(this, chunks, done);
  };
  return handed;
}

/** Whether `promise` settled within a few turns of the event loop. */
async function settlesSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 5 && !settled; i++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('HTTP/2 stream writes', () => {
  it("a writer goes on past node's high-water mark and waits once node holds STREAM_BUFFER_LIMIT; credit lets it go on", async () => {
    const { wrapper, node, body } = await wrappedServerStream(0); // no credit: node keeps every byte
    const batch = Buffer.alloc(16 * 1024 + 8, 1); // one of core's item batches, just over Node 20's 16 KiB mark
    // Node 20's mark is 16 KiB: the channel waited for 'drain' here, after every batch of a burst, before.
    expect(await settlesSoon(wrapper.write(batch))).toBe(true);
    expect(node.writableLength).toBeGreaterThanOrEqual(batch.length); // node holds it all, unsent
    let written = batch.length;
    let last: Promise<void> = Promise.resolve();
    while (written < STREAM_BUFFER_LIMIT) {
      last = wrapper.write(batch);
      written += batch.length;
    }
    expect(await settlesSoon(last)).toBe(false); // node holds the limit: the writer waits for 'drain'
    client!.settings({ initialWindowSize: 1024 * 1024 });
    await last;
    await wrapper.end();
    expect((await body()).length).toBe(written);
  });

  it('endWith sends the response HEADERS (no date header), the bytes and the end together', async () => {
    const { wrapper, response, body } = await wrappedServerStream(65535);
    await wrapper.endWith(Buffer.from('reply'));
    const headers = await response;
    expect(headers[':status']).toBe(200);
    expect(headers.date).toBeUndefined();
    expect((await body()).toString()).toBe('reply');
  });

  it("writes after a stream's first two, made in one turn, reach node as one at the turn's end; the first two go at once", async () => {
    const { wrapper, node, body } = await wrappedServerStream(1024 * 1024);
    const handed = recordHandOffs(node);
    // A streamed reply's first two items (architecture.md, "A stream's first token"): each handed to node in the call.
    const first = wrapper.write(Buffer.alloc(24, 1));
    expect(handed).toEqual([[24]]);
    const second = wrapper.write(Buffer.alloc(24, 2));
    await Promise.all([first, second]);
    expect(handed.flat()).toEqual([24, 24]);
    handed.length = 0;
    // node takes a write in and holds the next ones until nghttp2 sent it: the first of these went out alone before.
    const writes = [wrapper.write(Buffer.alloc(100, 3)), wrapper.write(Buffer.alloc(200, 4)), wrapper.write(Buffer.alloc(300, 5))];
    expect(await settlesSoon(Promise.all(writes))).toBe(true);
    expect(handed).toEqual([[100, 200, 300]]);
    await wrapper.end();
    expect((await body()).length).toBe(24 + 24 + 600);
  });

  it("a turn's last batch and the stream's end reach node as one write", async () => {
    const { wrapper, node, body } = await wrappedServerStream(1024 * 1024);
    await wrapper.write(Buffer.alloc(24, 1));
    await wrapper.write(Buffer.alloc(24, 2));
    const handed = recordHandOffs(node);
    const rest = wrapper.write(Buffer.alloc(7_560, 3));
    const end = wrapper.endWith(Buffer.alloc(6, 4));
    await Promise.all([rest, end]);
    expect(handed).toEqual([[7_560, 6]]);
    expect((await body()).length).toBe(24 + 24 + 7_560 + 6);
  });

  it(`a turn's writes go to node at once when they reach ${TURN_SEND_BYTES} bytes, and the writer waits until node sent them`, async () => {
    const { wrapper, node, budget, body } = await wrappedServerStream(1024 * 1024);
    await wrapper.write(Buffer.alloc(24, 1));
    await wrapper.write(Buffer.alloc(24, 2));
    const handed = recordHandOffs(node);
    const small = wrapper.write(Buffer.alloc(8_000, 3));
    expect(handed).toEqual([]); // held for the turn
    const batch = wrapper.write(Buffer.alloc(TURN_SEND_BYTES - 8_000 + 8, 4));
    // Handed over in the call, not at the turn's end: a producer that never waits would hold them until its last token.
    expect(handed).toEqual([[8_000, TURN_SEND_BYTES - 8_000 + 8]]);
    let sent = false;
    void batch.then(() => (sent = true));
    await small;
    await new Promise((resolve) => process.nextTick(resolve));
    expect(sent).toBe(false); // node sends from an immediate: the writer waits for it, so the bytes leave now
    expect(budget.bytes).toBeGreaterThan(TURN_SEND_BYTES); // node holds them, unsent
    await batch;
    expect(budget.bytes).toBe(0); // node reported them sent before the writer went on
    expect(node.writableLength).toBe(0);
    await wrapper.end();
    expect((await body()).length).toBe(24 + 24 + TURN_SEND_BYTES + 8);
  });

  it("a stream whose earlier bytes node still holds (the peer's window is shut) does not wait: its turn's writes go at the turn's end", async () => {
    const { wrapper, node } = await wrappedServerStream(0); // no credit: node keeps every byte
    await wrapper.write(Buffer.alloc(24, 1));
    await wrapper.write(Buffer.alloc(24, 2));
    const handed = recordHandOffs(node);
    // Waiting would only let the producer spread its stalled writes (12 KiB more held per call, measured).
    let written = false;
    void wrapper.write(Buffer.alloc(TURN_SEND_BYTES + 8, 3)).then(() => (written = true));
    await new Promise((resolve) => process.nextTick(resolve));
    expect(written).toBe(true); // within the turn: no immediate waited for
    expect(node.writableLength).toBe(24 + 24 + TURN_SEND_BYTES + 8);
    expect(handed.flat()).toEqual([]); // node keeps the first write in flight and buffers the rest itself
  });
});
