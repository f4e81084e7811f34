import { setTimeout as sleep } from 'node:timers/promises';
import type { TlsCredentials } from '@agentlink/core/transport';
import type { WebSocket } from 'ws';
import { serveMutualTlsWs, type RpcServer } from './mutual-tls-ws-server.js';
import type { JsonRpcMessage } from './subjects/json-rpc-ws.js';

const HIGH_WATER = 8 * 1024 * 1024;

/**
 * The JSON-RPC-over-ws subject's server: `echo` returns its params' data, `download` sends `chunk` notifications
 * then the response; mutual TLS as agentlink's ws listener does it (serveMutualTlsWs). A message that is not JSON
 * gets JSON-RPC's parse error, as a careful hand-written server would answer (it threw, and took the serving
 * process down, before 2026-11-25: `agentbench serve` may face any client).
 */
export function startJsonRpcServer(host: string, tls: TlsCredentials): Promise<RpcServer> {
  return serveMutualTlsWs(host, tls, (ws, data) => {
    let message: JsonRpcMessage;
    try {
      message = JSON.parse(data.toString()) as JsonRpcMessage;
    } catch {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }));
      return;
    }
    if (message.method === 'echo') ws.send(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: message.params?.data }));
    else if (message.method === 'download') void download(ws, message);
    else ws.send(JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } }));
  });
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
