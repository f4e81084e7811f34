/**
 * The raw transports under agentlink's ws and QUIC channels, as in-process 1 KB echoes (server and client in this
 * process, as call-cost needs), used the way agentbench's raw subjects use them: raw `ws` over TLS 1.3 (one binary
 * message each way on one socket) and the QUIC engine alone (one stream per echo: write, finish, read to the end).
 */
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Identity, publicKeyFromAgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import type { NativeBinding, NativeConnection, NativeReadEvent, NativeStream } from '@agentlink/quic';
import { WebSocket, WebSocketServer } from 'ws';
import { readAll, serveStreams } from './native-read.js';

export interface Echo {
  call(): Promise<void>;
  close(): Promise<void>;
}

export async function rawWsEcho(payload: Buffer): Promise<Echo> {
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  wss.on('connection', (ws) => ws.on('message', (data: Buffer) => ws.send(data)));
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const client = new WebSocket(`wss://127.0.0.1:${(https.address() as AddressInfo).port}`, { rejectUnauthorized: false, perMessageDeflate: false });
  await once(client, 'open');
  // Answers come in the order of the calls (one socket, ws keeps order), so any number may be in flight.
  const waiting: Array<((data: Buffer) => void) | undefined> = [];
  let head = 0;
  client.on('message', (data: Buffer) => {
    const answer = waiting[head];
    waiting[head++] = undefined;
    if (head === waiting.length) waiting.length = head = 0;
    answer?.(data);
  });
  return {
    call: () =>
      new Promise<void>((resolve, reject) => {
        waiting.push((data) => (data.length === payload.length ? resolve() : reject(new Error('short echo'))));
        client.send(payload);
      }),
    async close() {
      client.terminate();
      for (const ws of wss.clients) ws.terminate();
      https.closeAllConnections();
      https.close();
    },
  };
}

/** `pushReads`: the caller reads its answers through the engine's push reads (one crossing per batch) instead of `read`. */
export async function rawQuicEcho(binding: NativeBinding, payload: Buffer, options: { pushReads?: boolean } = {}): Promise<Echo> {
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const server = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: true });
  serveStreams(server, echoStream);
  const clientTls = selfSignedCertificate(Identity.generate());
  const client = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: clientTls.certDer, key: clientTls.keyDer, accept: false });
  const connection = await client.dial('127.0.0.1', server.localPort, Buffer.from(publicKeyFromAgentId(identity.id)), 5000).connection();
  const readAnswer = options.pushReads ? pushReader(connection) : readAll;
  return {
    async call() {
      const stream = connection.tryOpenStream() ?? (await connection.openStream());
      // Written and ended in one call, as the channel's last writes are (`tryWriteFinish`).
      const taken = stream.tryWriteFinish(payload);
      if (taken < payload.length) {
        await stream.write(payload.subarray(taken));
        if (!stream.tryFinish()) await stream.finish();
      }
      const echoed = await readAnswer(stream);
      stream.release();
      if (echoed.length !== payload.length) throw new Error('short echo');
    },
    async close() {
      connection.close(0, 'done');
      connection.release();
      client.close(0, 'done');
      server.close(0, 'done');
    },
  };
}

async function echoStream(stream: NativeStream): Promise<void> {
  const request = await readAll(stream);
  const taken = stream.tryWriteFinish(request);
  if (taken < request.length) {
    await stream.write(request.subarray(taken));
    if (!stream.tryFinish()) await stream.finish();
  }
  stream.release();
}

/** Reads to the end through the connection's push reads: each armed read comes back in the engine's next batch. */
function pushReader(connection: NativeConnection): (stream: NativeStream) => Promise<Buffer> {
  const waiting = new Map<number, (event: NativeReadEvent) => void>();
  connection.startReads(() => {
    for (const event of connection.takeReads()) {
      const settle = waiting.get(event.token);
      waiting.delete(event.token);
      settle?.(event);
    }
  });
  let tokens = 0;
  return async (stream) => {
    const token = ++tokens;
    const parts: Buffer[] = [];
    for (;;) {
      // What is here, or else the read armed, in one crossing (two with an engine older than `readOrArm`, for A/Bs).
      const ready = typeof stream.readOrArm === 'function' ? stream.readOrArm(token, 1 << 20) : (stream.tryRead(1 << 20) ?? stream.armRead(token, 1 << 20));
      if (ready === false) throw new Error('push reads not running');
      if (ready !== true && ready.length === 0) break;
      if (ready !== true) {
        parts.push(ready);
        continue;
      }
      const event = await new Promise<NativeReadEvent>((resolve) => waiting.set(token, resolve));
      if (event.error) throw new Error(event.error);
      if (event.data) parts.push(event.data);
      if (event.fin || !event.data) break;
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  };
}
