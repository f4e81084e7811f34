/**
 * The serving side of an agentbench run, in its own process: every subject's server on loopback (or the given
 * host), speaking the same two operations — echo, and download N bytes in chunks — so each figure compares like
 * with like. Prints the addresses as one JSON line.
 */
import { createSecureServer, type ServerHttp2Stream } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAgent, Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { loadNative, quic, type NativeStream, type QuicCongestion } from '@agentlink/quic';
import { http2 } from '@agentlink/http2';
import { webSocket } from '@agentlink/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { startBinaryRpcServer } from './binary-rpc-server.js';
import { startJsonRpcServer } from './json-rpc-server.js';
import type { ServerAddresses } from './subjects/subject.js';

const HIGH_WATER = 8 * 1024 * 1024;

export async function startServers(host = '127.0.0.1', quicCongestion?: QuicCongestion): Promise<{ addresses: ServerAddresses; close(): Promise<void> }> {
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const native = loadNative();

  // agentlink: one agent, reachable over every channel kind this machine has. The bench's own clients come from one
  // address, a thousand at once in the fleet scenario: the listener limits (1,024 per IP, 200 new/s) would refuse
  // them, so this server raises them, as an operator would for a known load generator.
  const limits = { maxConnections: 100_000, maxConnectionsPerIp: 100_000, newConnectionsPerIpPerSecond: 100_000 };
  const agent = await createAgent({
    identity,
    channels: [...(native.ok ? [quic({ port: 0, host, limits, congestion: quicCongestion })] : []), http2({ port: 0, host, limits }), webSocket({ port: 0, host, limits })],
    maxFrameSize: 64 * 1024 * 1024,
  });
  agent.handle('echo', (body: unknown) => body);
  agent.handleStream('download', async function* ({ total, chunk, delayMs = 0 }: { total: number; chunk: number; delayMs?: number }) {
    const buffer = Buffer.alloc(chunk, 7);
    for (let sent = 0; sent < total; sent += chunk) {
      if (delayMs > 0) await sleep(delayMs);
      yield sent + chunk <= total ? buffer : buffer.subarray(0, total - sent);
    }
  });
  // CPU this process has used so far (user + system, µs): the client reads it around a scenario to charge the
  // serving side's work to it too.
  agent.handle('cpu', () => {
    const usage = process.cpuUsage();
    return usage.user + usage.system;
  });
  // RSS after a full collection when the process allows one (a local run starts it with --expose-gc).
  agent.handle('rss', () => {
    globalThis.gc?.();
    return process.memoryUsage().rss;
  });

  // raw ws over TLS 1.3: binary messages echo; the text "download <total> <chunk>" streams bytes then "done".
  const https = createHttpsServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return ws.send(data as Buffer);
      const [, total, chunk, delayMs] = data.toString().split(' ').map(Number) as [number, number, number, number];
      void wsDownload(ws, total, chunk, delayMs);
    });
  });
  await new Promise<void>((resolve) => https.listen(0, host, resolve));

  // raw node:http2 over TLS 1.3 (h2): POST /echo returns the body; GET /download?total&chunk streams bytes.
  // The server grants large windows; each client subject chooses its own (tuned or node's defaults).
  const h2 = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 * 1024 * 1024 } });
  h2.on('session', (session) => session.setLocalWindowSize(32 * 1024 * 1024));
  h2.on('stream', (stream, headers) => {
    const url = new URL(headers[':path'] ?? '/', 'https://x');
    if (url.pathname === '/echo') {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        stream.respond({ ':status': 200 });
        stream.end(Buffer.concat(parts));
      });
    } else {
      stream.respond({ ':status': 200 });
      const param = (name: string): number => Number(url.searchParams.get(name) ?? 0);
      void streamDownload(stream, param('total'), param('chunk'), param('delay'));
    }
  });
  await new Promise<void>((resolve) => h2.listen(0, host, resolve));

  // JSON-RPC over ws, mutual TLS: what a user would write instead (see subjects/json-rpc-ws.ts).
  const jsonRpc = await startJsonRpcServer(host, tls);
  // The least RPC anyone could write over the same socket: the floor under any RPC (see subjects/binary-rpc-ws.ts).
  const binaryRpc = await startBinaryRpcServer(host, tls);

  // raw QUIC engine: per stream, byte 0 = echo (returns what follows), byte 1 = download (u32 total, u32 chunk).
  let rawQuic: ServerAddresses['rawQuic'];
  let closeRawQuic = (): void => undefined;
  if (native.ok) {
    const endpoint = await native.binding.bindEndpoint({ host, port: 0, cert: tls.certDer, key: tls.keyDer, accept: true });
    rawQuic = { host, port: endpoint.localPort, key: identity.id };
    closeRawQuic = () => endpoint.close(0, 'done');
    void (async () => {
      for (let connection = await endpoint.accept(); connection; connection = await endpoint.accept()) {
        const accepted = connection;
        void (async () => {
          // In batches, as the QUIC channel accepts them (one crossing out of the engine per burst of streams).
          for (let batch = await accepted.acceptStreams(); batch.length > 0; batch = await accepted.acceptStreams()) {
            for (const stream of batch) void serveRawQuicStream(stream).catch(() => undefined);
          }
        })();
      }
    })();
  }

  const port = (server: { address(): unknown }): number => (server.address() as AddressInfo).port;
  return {
    addresses: {
      agentlinkQuic: agent.addresses.find((a) => a.includes('@quic://')),
      agentlinkWs: agent.addresses.find((a) => a.includes('@wss://'))!,
      agentlinkHttp2: agent.addresses.find((a) => a.includes('@h2://'))!,
      rawWss: `wss://${host}:${port(https)}`,
      rawHttp2: `https://${host}:${port(h2)}`,
      rawQuic,
      jsonRpcWs: { url: jsonRpc.url, key: identity.id },
      binaryRpcWs: { url: binaryRpc.url, key: identity.id },
    },
    async close() {
      closeRawQuic();
      jsonRpc.close();
      binaryRpc.close();
      for (const client of wss.clients) client.terminate();
      https.closeAllConnections();
      h2.close();
      https.close();
      await agent.close();
    },
  };
}

async function wsDownload(ws: WebSocket, total: number, chunk: number, delayMs: number): Promise<void> {
  const buffer = Buffer.alloc(chunk, 7);
  for (let sent = 0; sent < total; sent += chunk) {
    if (delayMs > 0) await sleep(delayMs);
    const piece = sent + chunk <= total ? buffer : buffer.subarray(0, total - sent);
    if (ws.bufferedAmount > HIGH_WATER) await new Promise((resolve) => ws.send(piece, resolve));
    else ws.send(piece);
  }
  ws.send('done');
}

async function streamDownload(stream: ServerHttp2Stream, total: number, chunk: number, delayMs: number): Promise<void> {
  const buffer = Buffer.alloc(chunk, 7);
  for (let sent = 0; sent < total; sent += chunk) {
    if (delayMs > 0) await sleep(delayMs);
    const piece = sent + chunk <= total ? buffer : buffer.subarray(0, total - sent);
    if (!stream.write(piece)) await new Promise((resolve) => stream.once('drain', resolve));
  }
  stream.end();
}

async function serveRawQuicStream(stream: NativeStream): Promise<void> {
  const parts: Buffer[] = [];
  for (;;) {
    const data = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
    if (!data || data.length === 0) break; // null or empty: the caller finished its side
    parts.push(data);
  }
  const request = Buffer.concat(parts);
  if (request[0] === 0) {
    const reply = request.subarray(1);
    // Written and ended in one call, as the channel's reply is (`endWith`): the engine sends the bytes and the end together.
    const taken = stream.tryWriteFinish(reply);
    if (taken === reply.length) return stream.release();
    await stream.write(reply.subarray(taken));
  } else {
    const total = request.readUInt32BE(1);
    const chunk = request.readUInt32BE(5);
    const delayMs = request.length >= 13 ? request.readUInt32BE(9) : 0;
    const buffer = Buffer.alloc(chunk, 7);
    for (let sent = 0; sent < total; sent += chunk) {
      if (delayMs > 0) await sleep(delayMs);
      const piece = sent + chunk <= total ? buffer : buffer.subarray(0, total - sent);
      const taken = stream.tryWrite(piece);
      if (taken < piece.length) await stream.write(piece.subarray(taken));
    }
  }
  if (!stream.tryFinish()) await stream.finish();
  stream.release();
}
