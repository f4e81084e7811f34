import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import * as ws from 'ws';
import { webSocket } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

// ws's Receiver class, the one every WebSocket of this process reads with (exported by ws, untyped in this form).
interface ReceiverPrototype {
  write(chunk: Buffer): boolean;
  _isServer: boolean;
}
const receiverPrototype = (ws as unknown as { Receiver: { prototype: ReceiverPrototype } }).Receiver.prototype;

describe('the frame reader on connections the product makes', () => {
  it('reads the frames of calls on both sides (listener and dialler): ws’s Receivers get none of their bytes', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0 })] });
    agents.push(server);
    server.handle('echo', (body: unknown) => body);
    const client = await createAgent({ channels: [webSocket()] });
    agents.push(client);
    expect(await client.send(server.addresses[0]!, 'echo', 'first')).toBe('first');
    // From here on, count what reaches ws's Receivers, by side.
    const bytesToReceiver = { server: 0, client: 0 };
    const write = receiverPrototype.write;
    receiverPrototype.write = function (this: ReceiverPrototype, chunk: Buffer): boolean {
      bytesToReceiver[this._isServer ? 'server' : 'client'] += chunk.length;
      return write.call(this, chunk);
    };
    try {
      for (let i = 0; i < 20; i++) expect(await client.send(server.addresses[0]!, 'echo', `call ${i}`)).toBe(`call ${i}`);
    } finally {
      receiverPrototype.write = write;
    }
    expect(bytesToReceiver).toEqual({ server: 0, client: 0 });
  });
});
