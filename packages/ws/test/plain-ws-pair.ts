import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import * as ws from 'ws';

export interface PlainWsPair {
  /** The server's ws socket and the raw socket under it. */
  socket: ws.WebSocket;
  raw: Socket;
  /** A ws client with the zero mask key (as agentlink's own clients), connected to it. */
  client: ws.WebSocket;
  close(): void;
}

/**
 * A ws server socket and a client over plain TCP on loopback, for tests of what reads its frames: no TLS, no
 * agent, just `ws` (the real channel uses node's https server and TLS).
 */
export async function plainWsPair(serverOptions: { allowSynchronousEvents: boolean }): Promise<PlainWsPair> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const wss = new ws.WebSocketServer({ noServer: true, maxPayload: 100_000, ...serverOptions });
  const accepted = new Promise<{ socket: ws.WebSocket; raw: Socket }>((resolve) => {
    server.on('connection', (raw) => {
      raw.once('data', (request: Buffer) => {
        // Just enough of an HTTP upgrade for ws's handleUpgrade.
        const key = /sec-websocket-key: *(\S+)/i.exec(request.toString())![1]!;
        const fake = { method: 'GET', headers: { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-key': key, 'sec-websocket-version': '13' } };
        wss.handleUpgrade(fake as never, raw, Buffer.alloc(0), (socket) => resolve({ socket, raw }));
      });
    });
  });
  const client = new ws.WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, { generateMask: (mask: Buffer) => mask.fill(0) });
  const close = (): void => {
    client.terminate();
    wss.close();
    server.close();
  };
  try {
    await once(client, 'open');
    return { ...(await accepted), client, close };
  } catch (error) {
    close();
    throw error;
  }
}
