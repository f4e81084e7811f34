import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
// The hand-written client that can flood frames without reading (shared with the hostile suite).
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { webSocket } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** A masked ping (opcode 9) with a 125-byte payload, the largest a control frame may carry. */
function ping(): Buffer {
  return Buffer.concat([Buffer.from([0x89, 0x80 | 125]), Buffer.alloc(4), Buffer.alloc(125, 0x70)]);
}

describe('WebSocket control frames from a peer that does not read', () => {
  it('a ping flood whose pongs nobody reads is closed (at most 60 pongs wait past the socket buffers) and others are served', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0 })] });
    agents.push(server);
    server.handle('echo', (body: unknown) => body);
    const url = new URL(server.addresses[0]!.slice(server.addresses[0]!.indexOf('@') + 1));
    const flooder = await RawWebSocket.connect(url, url.pathname);
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
