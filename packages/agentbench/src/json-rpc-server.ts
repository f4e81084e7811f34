import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { authenticatePeer, type TlsCredentials } from '@agentlink/core/transport';
import { WebSocketServer, type WebSocket } from 'ws';
import type { JsonRpcMessage } from './subjects/json-rpc-ws.js';

const HIGH_WATER = 8 * 1024 * 1024;

/**
 * The JSON-RPC-over-ws subject's server: `echo` returns its params' data, `download` sends `chunk` notifications
 * then the response. Mutual TLS as agentlink's ws listener does it: a client certificate is required and its key
 * proved (any key is let in, as an agent listener lets any agent in).
 */
export async function startJsonRpcServer(host: string, tls: TlsCredentials): Promise<{ url: string; close(): void }> {
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
      ws.on('message', (data: Buffer) => {
        const message = JSON.parse(data.toString()) as JsonRpcMessage;
        if (message.method === 'echo') ws.send(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: message.params?.data }));
        else if (message.method === 'download') void download(ws, message);
        else ws.send(JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } }));
      });
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

async function download(ws: WebSocket, request: JsonRpcMessage): Promise<void> {
  const { total = 0, chunk = 1, delayMs = 0 } = request.params ?? {};
  const full = Buffer.alloc(chunk, 7).toString('base64');
  for (let sent = 0; sent < total; sent += chunk) {
    if (delayMs > 0) await sleep(delayMs);
    const data = sent + chunk <= total ? full : Buffer.alloc(total - sent, 7).toString('base64');
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'chunk', params: { call: request.id, data } });
    if (ws.bufferedAmount > HIGH_WATER) await new Promise((resolve) => ws.send(notification, resolve));
    else ws.send(notification);
  }
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: request.id, result: total }));
}
