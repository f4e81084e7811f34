/**
 * The floor of a unary RPC over ws: the least a hand-written RPC with agentlink's guarantees does over the same
 * TLS 1.3 `ws` socket as raw-echoes.ts's echo. One binary message per request, a msgpack tuple
 * [id, method, deadline (ms since the epoch), body]; pending calls in a Map by id, each with its own deadline
 * timer; the server looks the handler up in a Map, refuses a request past its deadline and answers
 * [id, ok, body]. What it leaves out that agentlink does: streams, cancellation, flow control, priorities,
 * identities beyond TLS, middleware. So agentlink ws ÷ this is what agentlink costs over any RPC, and this ÷
 * raw ws is what any RPC pays over an echo.
 */
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { Packr } from 'msgpackr';
import { WebSocket, WebSocketServer } from 'ws';
import type { Echo } from './raw-echoes.js';

type Request = [id: number, method: string, deadline: number, body: unknown];
type Reply = [id: number, ok: boolean, body: unknown];

const DEADLINE_MS = 30_000;

export async function msgpackRpcWs(payload: Buffer): Promise<Echo> {
  const packr = new Packr({ useRecords: false });
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  const handlers = new Map<string, (body: unknown) => unknown>([['echo', (body) => body]]);
  wss.on('connection', (ws) =>
    ws.on('message', (data: Buffer) => {
      const [id, method, deadline, body] = packr.unpack(data) as Request;
      const handler = handlers.get(method);
      const reply: Reply = handler === undefined ? [id, false, 'no such method'] : Date.now() > deadline ? [id, false, 'deadline'] : [id, true, handler(body)];
      ws.send(packr.pack(reply));
    }),
  );
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const client = new WebSocket(`wss://127.0.0.1:${(https.address() as AddressInfo).port}`, { rejectUnauthorized: false, perMessageDeflate: false });
  await once(client, 'open');

  interface Pending {
    resolve(body: unknown): void;
    reject(error: Error): void;
    timer: NodeJS.Timeout;
  }
  const pending = new Map<number, Pending>();
  let nextId = 0;
  client.on('message', (data: Buffer) => {
    const [id, ok, body] = packr.unpack(data) as Reply;
    const call = pending.get(id);
    if (call === undefined) return; // late: its deadline already passed
    pending.delete(id);
    clearTimeout(call.timer);
    if (ok) call.resolve(body);
    else call.reject(new Error(String(body)));
  });
  const send = (method: string, body: unknown): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error('deadline'));
      }, DEADLINE_MS);
      pending.set(id, { resolve, reject, timer });
      client.send(packr.pack([id, method, Date.now() + DEADLINE_MS, body] satisfies Request));
    });
  return {
    async call() {
      const answer = await send('echo', payload);
      if (!(answer instanceof Uint8Array) || answer.length !== payload.length) throw new Error('short echo');
    },
    async close() {
      client.terminate();
      for (const ws of wss.clients) ws.terminate();
      https.closeAllConnections();
      https.close();
    },
  };
}
