import { setTimeout as sleep } from 'node:timers/promises';
import type { TlsCredentials } from '@agentlink/core/transport';
import type { WebSocket } from 'ws';
import { serveMutualTlsWs, type RpcServer } from './mutual-tls-ws-server.js';
import { BinaryReply, replyHeader, type BinaryRequest } from './subjects/binary-rpc-ws.js';

const HIGH_WATER = 8 * 1024 * 1024;

/**
 * The binary-RPC-over-ws subject's server: `echo` answers with the request's body, `download` (u32 total, u32
 * chunk, u32 delay in ms) sends `item` messages then an empty response; mutual TLS as agentlink's ws listener and
 * the JSON-RPC server do it (serveMutualTlsWs).
 */
export function startBinaryRpcServer(host: string, tls: TlsCredentials): Promise<RpcServer> {
  return serveMutualTlsWs(host, tls, (ws, data) => {
    // Shorter than an id and a method length, or a method cut short: not a request (ws closes with 1002).
    if (data.length < 5 || data.length < 5 + data[4]!) return ws.close(1002, 'not a request');
    const request = readRequest(data);
    if (request.method === 'echo') ws.send(reply(request.id, BinaryReply.response, request.body));
    else if (request.method === 'download' && request.body.length >= 12) void download(ws, request);
    else ws.send(reply(request.id, BinaryReply.error, Buffer.from('no such method')));
  });
}

/** u32 id, u8 method length, the method (latin1), the body: read where it lies. */
function readRequest(data: Buffer): BinaryRequest {
  const length = data[4]!;
  let method = '';
  for (let i = 0; i < length; i++) method += String.fromCharCode(data[5 + i]!);
  return { id: data.readUInt32BE(0), method, body: data.subarray(5 + length) };
}

/** The reply's 5-byte header and its body in one buffer (one ws message, one write). */
function reply(id: number, kind: BinaryReply, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  replyHeader(out, id, kind);
  out.set(body, 5);
  return out;
}

async function download(ws: WebSocket, request: BinaryRequest): Promise<void> {
  const total = request.body.readUInt32BE(0);
  const chunk = Math.max(1, request.body.readUInt32BE(4));
  const delayMs = request.body.readUInt32BE(8);
  const full = reply(request.id, BinaryReply.item, Buffer.alloc(chunk, 7));
  for (let sent = 0; sent < total; sent += chunk) {
    if (delayMs > 0) await sleep(delayMs);
    const message = sent + chunk <= total ? full : full.subarray(0, 5 + total - sent);
    if (ws.bufferedAmount > HIGH_WATER) await new Promise((resolve) => ws.send(message, resolve));
    else ws.send(message);
  }
  ws.send(reply(request.id, BinaryReply.response, new Uint8Array(0)));
}
