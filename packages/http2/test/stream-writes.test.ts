import { once } from 'node:events';
import { connect, createServer, type ClientHttp2Session, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { AgentError } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { Http2ChannelStream, STREAM_BUFFER_LIMIT } from '../src/http2-stream.js';
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
async function wrappedServerStream(windowSize: number): Promise<{ wrapper: Http2ChannelStream; node: ServerHttp2Stream; response: Promise<IncomingHttpHeaders>; body: () => Promise<Buffer> }> {
  server = createServer();
  const streams = once(server, 'stream') as Promise<[ServerHttp2Stream]>;
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { settings: { initialWindowSize: windowSize } });
  const request = client.request({ ':method': 'POST', ':path': '/agentlink' });
  request.write('x');
  const [node] = await streams;
  const wrapper = new Http2ChannelStream(node, () => new AgentError('UNAVAILABLE', 'gone'), () => undefined, new OutboundBudget(16 * 1024 * 1024));
  wrapper.respondWith = { ':status': 200 };
  const response = once(request, 'response').then(([headers]) => headers as IncomingHttpHeaders);
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = once(request, 'end');
  return { wrapper, node, response, body: async () => (await ended, Buffer.concat(chunks)) };
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
});
