import { request } from 'node:https';
import { once } from 'node:events';
import { createHook } from 'node:async_hooks';
import { Identity, createAgent, type Agent } from '@agentlink/core';
import { MuxedChannel, selfSignedCertificate } from '@agentlink/core/transport';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as wsModule from 'ws';
import { WebSocket } from 'ws';

/** ws's frame writer (exported by ws, not declared by @types/ws): every frame a socket sends goes through it. */
interface FrameWriter {
  frame(data: Buffer, options: { mask?: boolean }): Buffer[];
}
const Sender = (wsModule as unknown as { Sender: FrameWriter }).Sender;
import { webSocket } from '../src/index.js';

describe('ws channel specifics', () => {
  it('an invalid mux option fails webSocket() itself, not each connection later', () => {
    expect(() => webSocket({ mux: { maxChunk: 0 } })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('mux.maxChunk') }));
    expect(() => webSocket({ port: 0, mux: { window: 1000 } })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    // ws reads maxPayload 0 as no limit at all on an unfinished message.
    expect(() => webSocket({ port: 0, maxPayload: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('maxPayload') }));
  });

  let server: Agent;
  let url: string;

  beforeAll(async () => {
    server = await createAgent({ channels: [webSocket({ port: 0 })] });
    server.handle('echo', (body: unknown) => body);
    url = server.addresses[0]!.split('@')[1]!;
  });
  afterAll(() => server.close());

  it('listens on wss:// only: the TLS handshake is 1.3 with an Ed25519 certificate', async () => {
    const { hostname, port } = new URL(url);
    // An agent's certificate: a client without one is refused right after the handshake (see hostile-peers).
    const { key, cert } = selfSignedCertificate(Identity.generate());
    const req = request({ host: hostname, port, path: '/agentlink', key, cert, rejectUnauthorized: false });
    const [response] = (await once(req.end(), 'response')) as [import('node:http').IncomingMessage];
    const socket = response.socket as import('node:tls').TLSSocket;
    expect(socket.getProtocol()).toBe('TLSv1.3');
    expect(socket.getPeerX509Certificate()?.publicKey.asymmetricKeyType).toBe('ed25519');
    expect(response.statusCode).toBe(426);
    response.resume();
  });

  it('refuses a WebSocket client that presents no agent certificate (401)', async () => {
    const ws = new WebSocket(url, { rejectUnauthorized: false });
    ws.on('error', () => undefined);
    const [, response] = (await once(ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    expect(response.statusCode).toBe(401);
    ws.terminate();
  });

  it('a malformed mux frame from the peer closes the channel with PROTOCOL_ERROR on both sides', async () => {
    const client = await createAgent({ channels: [webSocket()] });
    try {
      await client.send(server.addresses[0]!, 'echo', 1);
      const [serverSide] = server.channels(client.id);
      const [clientSide] = client.channels(server.id);
      // Write under the mux, as a broken peer would: two bytes are shorter than a mux header.
      (clientSide as unknown as { pipe: { send(m: Uint8Array): void } }).pipe.send(Buffer.from([1, 2]));
      expect((await serverSide!.closed).code).toBe('PROTOCOL_ERROR');
      expect((await clientSide!.closed).code).toBe('PROTOCOL_ERROR');
      expect(await client.send(server.addresses[0]!, 'echo', 'redialled')).toBe('redialled');
    } finally {
      await client.close();
    }
  });

  it('a unary call is two WebSocket messages: the request with OPEN|ENDS_WITH_PEER, the response with DATA|FIN', async () => {
    const client = await createAgent({ channels: [webSocket()] });
    try {
      // The channel and both SETTINGS. The first call may leave before the server's SETTINGS arrive (then it
      // is plain OPEN/DATA/FIN frames): the second's reply comes after that call's FIN on the ordered pipe.
      await client.send(server.addresses[0]!, 'echo', 'warm-up');
      await client.send(server.addresses[0]!, 'echo', 'warm-up');
      const received = vi.spyOn(MuxedChannel.prototype, 'receive');
      for (let i = 0; i < 5; i++) expect(await client.send(server.addresses[0]!, 'echo', i)).toBe(i);
      await new Promise((resolve) => setImmediate(resolve));
      const typeBytes = received.mock.calls.map(([message]) => message[0]);
      received.mockRestore();
      expect(typeBytes.filter((byte) => byte === 0x40)).toHaveLength(5); // OPEN with the request, no FIN of the caller
      expect(typeBytes.filter((byte) => byte === 0x81)).toHaveLength(5); // the response carrying the FIN
      expect(typeBytes).toHaveLength(10);
    } finally {
      await client.close();
    }
  });

  it('a unary call answered at once makes no promise of agentlink\'s but the one send returns, on either side', async () => {
    const client = await createAgent({ channels: [webSocket()] });
    try {
      await client.send(server.addresses[0]!, 'echo', 'warm-up');
      await client.send(server.addresses[0]!, 'echo', 'warm-up');
      // Promises made by agentlink's own code (core and this package), told by the frame that made them.
      let ours = 0;
      const counting = createHook({
        init(_id, type) {
          if (type !== 'PROMISE') return;
          const where = new Error().stack!.split('\n').slice(2).find((line) => !line.includes('node:') && !line.includes('<anonymous>'));
          if (where && /packages\/(core|ws)\/src\//.test(where)) ours++;
        },
      });
      const calls = 5;
      counting.enable();
      for (let i = 0; i < calls; i++) expect(await client.send(server.addresses[0]!, 'echo', Buffer.alloc(100, i))).toEqual(Buffer.alloc(100, i));
      counting.disable();
      // The caller's attempt, the server's stream and its call ran without an async function each (a promise per
      // call apiece, and their hops): what is left is `send`'s own promise.
      expect(ours).toBe(calls);
    } finally {
      await client.close();
    }
  });

  it('a frame of exactly the high-water mark into an idle socket, over the mark with its WebSocket header, still wakes the writer behind it', async () => {
    const sink = await createAgent({ channels: [webSocket({ port: 0 })] });
    let ended!: (bytes: number) => void;
    const received = new Promise<number>((resolve) => (ended = resolve));
    sink.handleTunnel('sink', () => ({
      onOpen: (stream) =>
        void (async () => {
          let bytes = 0;
          for (let chunk = await stream.read(); chunk; chunk = await stream.read()) bytes += chunk.length;
          ended(bytes);
        })(),
    }));
    const mark = 64 * 1024;
    const client = await createAgent({ channels: [webSocket({ mux: { highWaterMark: mark, maxChunk: mark } })] });
    try {
      const { stream } = await client.openTunnel(sink.addresses[0]!, 'sink');
      const [channel] = client.channels(sink.id);
      const pipe = (channel as unknown as { pipe: { bufferedAmount: number } }).pipe;
      expect(pipe.bufferedAmount).toBe(0); // idle: the frame below is alone in it, with only ws's own bytes beside it
      await stream.write(Buffer.alloc(mark - 5, 1)); // taken at once: not over the mark by the mux's count...
      expect((channel as MuxedChannel).congested).toBe(true); // ...but the socket holds it with ws's header (and mask key)
      // This write waits for room: only word of the frame above leaving can wake it.
      await stream.write(Buffer.alloc(100, 2));
      await stream.end();
      expect(await received).toBe(mark - 5 + 100);
    } finally {
      await client.close();
      await sink.close();
    }
  }, 10_000);

  it("the client's frames are masked with a zero key (no XOR per byte on either side) and the server reads them", async () => {
    const client = await createAgent({ channels: [webSocket()] });
    try {
      await client.send(server.addresses[0]!, 'echo', 'warm-up');
      const [channel] = client.channels(server.id);
      const raw = (channel as unknown as { pipe: { raw: import('node:stream').Duplex } }).pipe.raw;
      const writes = vi.spyOn(raw, 'write');
      const framed = vi.spyOn(Sender, 'frame');
      const body = Buffer.alloc(1024, 0x5a);
      expect(Buffer.from(await client.send<Uint8Array>(server.addresses[0]!, 'echo', body))).toEqual(body);
      const written = writes.mock.calls.map(([chunk]) => Buffer.from(chunk as Uint8Array));
      writes.mockRestore();
      // The request, written by hand into the room in front of its frame (ws-frame-header.ts): header and mux
      // frame in one write, not through ws's sender.
      expect(framed).not.toHaveBeenCalled();
      expect(written).toHaveLength(1);
      const frame = written[0]!;
      expect(frame[0]).toBe(0x82); // FIN, binary
      expect(frame[1]! & 0x80).toBe(0x80); // MASK bit set: an RFC 6455 client frame
      expect(frame[1]! & 0x7f).toBe(126); // a 16-bit length follows
      expect([...frame.subarray(4, 8)]).toEqual([0, 0, 0, 0]);
      expect(frame.length).toBe(8 + frame.readUInt16BE(2));
      expect(frame.subarray(8).includes(body)).toBe(true); // the payload as it is: a zero key changes no byte
      // Frames that go through ws's sender (here the GOAWAY and ws's close frame) get the zero key from ws.
      await channel!.close();
      const masked = framed.mock.calls.flatMap(([, options], i) => (options.mask ? [framed.mock.results[i]!.value as Buffer[]] : []));
      const headers = masked.map((frame) => Buffer.from(frame[0]!));
      framed.mockRestore();
      expect(headers.length).toBeGreaterThan(0);
      for (const header of headers) {
        expect(header[1]! & 0x80).toBe(0x80);
        const length = header[1]! & 0x7f;
        const keyAt = length === 126 ? 4 : length === 127 ? 10 : 2;
        expect([...header.subarray(keyAt, keyAt + 4)]).toEqual([0, 0, 0, 0]);
      }
    } finally {
      await client.close();
    }
  });
});
