import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { authenticatePeer, type TlsCredentials } from '@agentlink/core/transport';
import { WebSocketServer, type WebSocket } from 'ws';

/** What agentbench's hand-written RPC servers (JSON-RPC, binary RPC) return: where to dial, and how to stop. */
export interface RpcServer {
  url: string;
  close(): void;
}

/**
 * A wss server with mutual TLS as agentlink's ws listener does it: TLS 1.3, a client certificate required and its
 * key proved (any key is let in, as an agent listener lets any agent in). The baseline subjects' servers share it, so
 * they differ from each other and from agentlink only in what they do per message.
 */
export async function serveMutualTlsWs(host: string, tls: TlsCredentials, onMessage: (ws: WebSocket, data: Buffer) => void): Promise<RpcServer> {
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false });
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  https.on('upgrade', (request, socket, head) => {
    try {
      authenticatePeer(socket as TLSSocket);
    } catch {
      socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      ws.on('message', (data: Buffer) => onMessage(ws, data));
    });
  });
  await new Promise<void>((resolve) => https.listen(0, host, resolve));
  return {
    url: `wss://${host}:${(https.address() as AddressInfo).port}`,
    close() {
      for (const client of wss.clients) client.terminate();
      https.closeAllConnections();
      https.close();
    },
  };
}
