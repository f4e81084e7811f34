import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
// The hand-written client that can send what no polite client does (shared with the hostile suite).
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { webSocket } from '../src/index.js';
import { LARGEST_AGENTLINK_MESSAGE } from '../src/web-socket-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});
async function server(): Promise<Agent> {
  const created = await createAgent({ channels: [webSocket({ port: 0 })] });
  agents.push(created);
  created.handle('echo', (body: unknown) => body);
  return created;
}
/** What the tests send against: spelled out, so they show the gap without this change too. */
const LARGEST = 5 + 64 * 1024;
const urlOf = (address: string): URL => new URL(address.slice(address.indexOf('@') + 1));

/** The header of one masked binary frame declaring `length` payload bytes (64-bit length form), then its zero key. */
function header(length: number): Buffer {
  const h = Buffer.alloc(14);
  h[0] = 0x82;
  h[1] = 0x80 | 127;
  h.writeBigUInt64BE(BigInt(length), 2);
  return h;
}

/** Everything the server sends until it closes the connection. */
function collect(peer: RawWebSocket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  peer.socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  peer.socket.resume();
  return new Promise((resolve) => peer.socket.once('close', () => resolve(Buffer.concat(chunks))));
}
/** The status code of the close frame (opcode 8) in what the server sent, if any. */
function closeCode(received: Buffer): number | undefined {
  const at = received.indexOf(0x88);
  return at >= 0 && received.length >= at + 4 ? received.readUInt16BE(at + 2) : undefined;
}

describe('the largest WebSocket message a peer may send', () => {
  it('is one mux frame: header + 64 KiB of DATA body', () => {
    expect(LARGEST_AGENTLINK_MESSAGE).toBe(5 + 64 * 1024);
  });

  it('a frame declaring one byte more is refused at its header (1009), before its bytes are held below the mux', async () => {
    const agent = await server();
    const url = urlOf(agent.addresses[0]!);
    const peer = await RawWebSocket.connect(url, url.pathname);
    expect(peer.status).toBe(101);
    const received = collect(peer);
    // Before 2026-11-24 ws took 1 MiB here and kept the connection open holding every byte sent of it.
    peer.socket.write(header(LARGEST + 1));
    expect(closeCode(await received)).toBe(1009);
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    expect(await client.send(agent.addresses[0]!, 'echo', 'still here')).toBe('still here');
  });

  it('a message of that size in fragments is refused once the fragments pass it', async () => {
    const agent = await server();
    const url = urlOf(agent.addresses[0]!);
    const peer = await RawWebSocket.connect(url, url.pathname);
    const received = collect(peer);
    // Four 32 KiB fragments of one binary message (none with FIN): the third passes the bound.
    const fragment = (first: boolean): Buffer => {
      const h = Buffer.from([first ? 0x02 : 0x00, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0, 0, 0, 0]);
      return Buffer.concat([h, Buffer.alloc(32 * 1024, 0x41)]);
    };
    for (let i = 0; i < 4 && !peer.socket.destroyed; i++) peer.socket.write(fragment(i === 0));
    expect(closeCode(await received)).toBe(1009);
  });

  it('an agentlink call carrying items and bodies larger than a frame still goes through (each frame is one message)', async () => {
    const agent = await server();
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    const body = 'x'.repeat(3 * 1024 * 1024);
    expect(await client.send(agent.addresses[0]!, 'echo', body)).toBe(body);
  });

  it('a larger mux.maxChunk raises the bound with it (both sides configured alike)', async () => {
    const maxChunk = 256 * 1024;
    const big = await createAgent({ channels: [webSocket({ port: 0, mux: { maxChunk } })] });
    agents.push(big);
    big.handle('echo', (body: unknown) => body);
    const client = await createAgent({ channels: [webSocket({ mux: { maxChunk } })] });
    agents.push(client);
    const body = 'y'.repeat(2 * 1024 * 1024);
    expect(await client.send(big.addresses[0]!, 'echo', body)).toBe(body);
  });

  it('a side with a larger mux.maxChunk sends a peer on the default pieces of 64 KiB: no 1009, both ways', async () => {
    // Until 2026-11-24 the larger side's first frame above 5 + 64 KiB closed the connection at the other side.
    const maxChunk = 256 * 1024;
    const big = await createAgent({ channels: [webSocket({ port: 0, mux: { maxChunk } })] });
    agents.push(big);
    big.handle('echo', (body: unknown) => body);
    const plain = await server();
    const bigClient = await createAgent({ channels: [webSocket({ mux: { maxChunk } })] });
    agents.push(bigClient);
    const plainClient = await createAgent({ channels: [webSocket()] });
    agents.push(plainClient);
    const body = 'z'.repeat(2 * 1024 * 1024);
    expect(await plainClient.send(big.addresses[0]!, 'echo', body)).toBe(body); // the reply's pieces: the larger side's
    expect(await bigClient.send(plain.addresses[0]!, 'echo', body)).toBe(body); // the request's pieces
  });
});
