/**
 * The raw transports under agentlink's channels streaming a burst of small tokens, server and client in this
 * process (as token-burst needs), the way agentbench's raw subjects do it: raw `ws` over TLS 1.3 (one binary
 * message per token, a text message at the end), node:http2 over TLS (one `write` per token on a GET's
 * response), the QUIC engine alone (one `tryWrite` per token on one stream, then finish).
 */
import { once } from 'node:events';
import { connect, createSecureServer, type ClientHttp2Session } from 'node:http2';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Identity, publicKeyFromAgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import type { NativeBinding, NativeStream } from '@agentlink/quic';
import { WebSocket, WebSocketServer } from 'ws';
import { readAll, requestBurst, serveStreams } from './native-read.js';

/** One burst source: `burst(count, onFirst)` calls `onFirst` when the first token lands, resolves once all did. */
/** A token as the handler yields it: bytes, or (`token-burst --string`) a string, which each raw transport sends as its users would. */
export type Token = Buffer | string;

export interface Burst {
  burst(count: number, onFirst: () => void): Promise<void>;
  close(): Promise<void>;
}

export async function rawWsBurst(token: Token): Promise<Burst> {
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  // One message per token (a string token: a text message); the caller counts them.
  wss.on('connection', (ws) =>
    ws.on('message', (data: Buffer) => {
      const count = Number(data.toString());
      for (let i = 0; i < count; i++) ws.send(token);
    }),
  );
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const client = new WebSocket(`wss://127.0.0.1:${(https.address() as AddressInfo).port}`, { rejectUnauthorized: false, perMessageDeflate: false });
  await once(client, 'open');
  let onFirst: (() => void) | undefined;
  let onDone: (() => void) | undefined;
  let expected = 0;
  let received = 0;
  client.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) data.toString(); // what a caller of string tokens does with each
    if (received++ === 0) onFirst?.();
    if (received === expected) onDone?.();
  });
  return {
    burst(count, first) {
      return new Promise<void>((resolve) => {
        onFirst = first;
        onDone = resolve;
        expected = count;
        received = 0;
        client.send(String(count));
      });
    },
    async close() {
      client.terminate();
      for (const ws of wss.clients) ws.terminate();
      https.closeAllConnections();
      https.close();
    },
  };
}

export async function rawHttp2Burst(token: Token): Promise<Burst> {
  const tls = selfSignedCertificate(Identity.generate());
  const server = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  server.on('stream', (stream, headers) => {
    const count = Number(new URL(headers[':path'] ?? '/', 'https://x').searchParams.get('n'));
    stream.respond({ ':status': 200 });
    for (let i = 0; i < count; i++) stream.write(token);
    stream.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const session: ClientHttp2Session = connect(`https://127.0.0.1:${(server.address() as AddressInfo).port}`, { rejectUnauthorized: false });
  await once(session, 'connect');
  return {
    burst(count, onFirst) {
      return new Promise<void>((resolve, reject) => {
        const request = session.request({ ':path': `/download?n=${count}` });
        if (typeof token === 'string') request.setEncoding('utf8'); // chunks arrive as strings
        let received = 0;
        request.on('data', (data: Buffer) => {
          if (received === 0) onFirst();
          received += data.length;
        });
        request.on('end', () => (received === count * token.length ? resolve() : reject(new Error(`burst moved ${received} bytes`))));
        request.on('error', reject);
        request.end();
      });
    },
    async close() {
      session.destroy();
      server.close();
    },
  };
}

export async function rawQuicBurst(binding: NativeBinding, token: Token): Promise<Burst> {
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const server = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: true });
  serveStreams(server, (stream) => serveBurst(stream, token));
  const clientTls = selfSignedCertificate(Identity.generate());
  const client = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: clientTls.certDer, key: clientTls.keyDer, accept: false });
  const connection = await client.dial('127.0.0.1', server.localPort, Buffer.from(publicKeyFromAgentId(identity.id)), 5000).connection();
  return {
    async burst(count, onFirst) {
      const stream = await requestBurst(connection, count);
      let received = 0;
      for (;;) {
        const data = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
        if (!data || data.length === 0) break; // null or empty: the peer finished
        if (received === 0) onFirst();
        received += data.length;
      }
      stream.release();
      if (received !== count * token.length) throw new Error(`burst moved ${received} bytes`);
    },
    async close() {
      connection.close(0, 'done');
      connection.release();
      client.close(0, 'done');
      server.close(0, 'done');
    },
  };
}

async function serveBurst(stream: NativeStream, token: Token): Promise<void> {
  const count = (await readAll(stream)).readUInt32BE(0);
  for (let i = 0; i < count; i++) {
    const bytes = typeof token === 'string' ? Buffer.from(token) : token; // the engine takes bytes: encode each
    const taken = stream.tryWrite(bytes);
    if (taken < bytes.length) await stream.write(bytes.subarray(taken));
  }
  if (!stream.tryFinish()) await stream.finish();
  stream.release();
}
