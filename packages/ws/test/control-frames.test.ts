import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
// The hand-written client that can flood frames without reading (shared with the hostile suite).
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { webSocket } from '../src/index.js';
import { MAX_BUFFERED_READS, MAX_FRAGMENTS } from '../src/web-socket-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** An agent serving `echo` on ws, and a hand-written WebSocket client connected to it (not an agent). */
async function echoServerAndRawPeer(): Promise<{ server: Agent; peer: RawWebSocket }> {
  const server = await createAgent({ channels: [webSocket({ port: 0 })] });
  agents.push(server);
  server.handle('echo', (body: unknown) => body);
  const url = new URL(server.addresses[0]!.slice(server.addresses[0]!.indexOf('@') + 1));
  return { server, peer: await RawWebSocket.connect(url, url.pathname) };
}

/** A masked ping (opcode 9) with a 125-byte payload, the largest a control frame may carry. */
function ping(): Buffer {
  return Buffer.concat([Buffer.from([0x89, 0x80 | 125]), Buffer.alloc(4), Buffer.alloc(125, 0x70)]);
}

describe('WebSocket control frames from a peer that does not read', () => {
  it('a ping flood whose pongs nobody reads is closed (at most 60 pongs wait past the socket buffers) and others are served', async () => {
    const { server, peer: flooder } = await echoServerAndRawPeer();
    expect(flooder.status).toBe(101);
    // 100,000 pings (13 MB) written as fast as the server takes them; the flooder never reads a pong.
    const closed = new Promise<void>((resolve) => flooder.socket.once('close', () => resolve()));
    const batch = Buffer.concat(Array.from({ length: 1000 }, ping));
    let sent = 0;
    const flood = async (): Promise<void> => {
      for (let i = 0; i < 100 && !flooder.socket.destroyed; i++) {
        sent++;
        if (!flooder.socket.write(batch)) await Promise.race([new Promise((resolve) => flooder.socket.once('drain', resolve)), closed]);
      }
    };
    await flood();
    await closed; // the server terminated it (the test's timeout bounds the wait)
    expect(sent).toBeLessThan(100); // before the flood was over
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    expect(await client.send(server.addresses[0]!, 'echo', 'still here')).toBe('still here');
  });
});

describe('a WebSocket message in tiny fragments', () => {
  it(`is refused after ${MAX_FRAGMENTS} fragments (1008), not after ws's default of 16,384 (~200 B of heap each, outside core's budgets)`, async () => {
    const { server, peer } = await echoServerAndRawPeer();
    // What the server sends back: a pong per batch (so we know it read the batch), then its close frame (0x88)
    // with status 1008, policy violation.
    let received = Buffer.alloc(0);
    let isClosed = false;
    let onReceived = (): void => undefined;
    const refused = (): boolean => {
      const at = received.indexOf(Buffer.from([0x88]));
      return at >= 0 && received.length >= at + 4 && received.readUInt16BE(at + 2) === 1008;
    };
    peer.socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      onReceived();
    });
    peer.socket.once('close', () => ((isClosed = true), onReceived()));
    peer.socket.resume();
    // One binary message that never ends: a 1-byte first fragment, then 1-byte continuations (FIN never set).
    const fragment = (first: boolean): Buffer => Buffer.concat([Buffer.from([first ? 0x02 : 0x00, 0x80 | 1]), Buffer.alloc(4), Buffer.from([0x41])]);
    let sent = 0;
    for (let batch = 0; !isClosed && !refused() && sent < 4 * MAX_FRAGMENTS; batch++) {
      const tag = Buffer.alloc(4);
      tag.writeUInt32BE(batch);
      const fragments = Array.from({ length: 256 }, (_, i) => fragment(sent + i === 0));
      sent += 256;
      // A ping after the batch (control frames may come between fragments): its pong says the server read the batch.
      peer.socket.write(Buffer.concat([...fragments, Buffer.from([0x89, 0x80 | 4]), Buffer.alloc(4), tag]));
      const pong = Buffer.concat([Buffer.from([0x8a, 4]), tag]);
      await new Promise<void>((resolve) => {
        onReceived = () => {
          if (isClosed || refused() || received.includes(pong)) resolve();
        };
        onReceived();
      });
    }
    expect(refused()).toBe(true);
    expect(sent).toBeLessThanOrEqual(2 * MAX_FRAGMENTS);
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    expect(await client.send(server.addresses[0]!, 'echo', 'still here')).toBe('still here');
  });
});

describe('a WebSocket frame in tiny TLS records', () => {
  it(`is refused after ${MAX_BUFFERED_READS} reads held (1008), not after ws's default of 262,144 (~190 B of heap each, outside core's budgets)`, async () => {
    const { server, peer } = await echoServerAndRawPeer();
    let received = Buffer.alloc(0);
    let isClosed = false;
    const refused = (): boolean => {
      const at = received.indexOf(Buffer.from([0x88]));
      return at >= 0 && received.length >= at + 4 && received.readUInt16BE(at + 2) === 1008;
    };
    peer.socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
    const closed = new Promise<void>((resolve) => peer.socket.once('close', () => ((isClosed = true), resolve())));
    peer.socket.resume();
    // A binary frame declaring 64 KiB (within maxPayload), then its bytes one TLS record (one read at the server) each:
    // a write waits for the one before it, or node would join them into one record.
    const write = (bytes: Buffer): Promise<void> => new Promise((resolve) => peer.socket.write(bytes, () => resolve()));
    await write(Buffer.from([0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
    let sent = 0;
    while (!isClosed && !refused() && sent < 4 * MAX_BUFFERED_READS) {
      await write(Buffer.from([0x41]));
      sent++;
    }
    await closed; // the server closed it (the test's timeout bounds the wait)
    expect(refused()).toBe(true);
    expect(sent).toBeLessThan(4 * MAX_BUFFERED_READS);
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    expect(await client.send(server.addresses[0]!, 'echo', 'still here')).toBe('still here');
  });
});
