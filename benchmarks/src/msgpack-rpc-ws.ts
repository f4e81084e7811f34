/**
 * The floor of a unary RPC over ws: the least a hand-written RPC with agentlink's guarantees does over the same
 * TLS 1.3 `ws` socket as raw-echoes.ts's echo. One binary message per request, [id, method, deadline (ms since the
 * epoch), body] as a msgpack tuple (msgpackRpcWs) or laid out by hand (binaryRpcWs); pending calls in a Map by id, each with its own deadline
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

/** How a request and a reply become one ws message and back. */
interface RpcCodec {
  packRequest(request: Request): Uint8Array;
  unpackRequest(data: Buffer): Request;
  packReply(reply: Reply): Uint8Array;
  unpackReply(data: Buffer): Reply;
}

function msgpackCodec(): RpcCodec {
  const packr = new Packr({ useRecords: false });
  return {
    packRequest: (request) => packr.pack(request),
    unpackRequest: (data) => packr.unpack(data) as Request,
    packReply: (reply) => packr.pack(reply),
    unpackReply: (data) => packr.unpack(data) as Reply,
  };
}

/**
 * Bytes laid out by hand, bodies as bytes only: request = u32 id, f64 deadline, u8 method length, the method
 * (latin1), the body; reply = u32 id, u8 ok, the body. Bodies are read as views where they lie, as agentlink's
 * binary frames are: the least any RPC over ws can do per call.
 */
function binaryCodec(): RpcCodec {
  return {
    packRequest([id, method, deadline, body]) {
      const bytes = body as Buffer;
      const out = Buffer.allocUnsafe(13 + method.length + bytes.length);
      out.writeUInt32BE(id, 0);
      out.writeDoubleBE(deadline, 4);
      out[12] = method.length;
      for (let i = 0; i < method.length; i++) out[13 + i] = method.charCodeAt(i);
      out.set(bytes, 13 + method.length);
      return out;
    },
    unpackRequest(data) {
      const length = data[12]!;
      let method = '';
      for (let i = 0; i < length; i++) method += String.fromCharCode(data[13 + i]!);
      return [data.readUInt32BE(0), method, data.readDoubleBE(4), data.subarray(13 + length)];
    },
    packReply([id, ok, body]) {
      const bytes = typeof body === 'string' ? Buffer.from(body) : (body as Buffer);
      const out = Buffer.allocUnsafe(5 + bytes.length);
      out.writeUInt32BE(id, 0);
      out[4] = ok ? 1 : 0;
      out.set(bytes, 5);
      return out;
    },
    unpackReply: (data) => [data.readUInt32BE(0), data[4] === 1, data.subarray(5)],
  };
}

export const msgpackRpcWs = (payload: Buffer): Promise<Echo> => rpcOverWs(payload, msgpackCodec());
export const binaryRpcWs = (payload: Buffer): Promise<Echo> => rpcOverWs(payload, binaryCodec());

async function rpcOverWs(payload: Buffer, codec: RpcCodec): Promise<Echo> {
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  const handlers = new Map<string, (body: unknown) => unknown>([['echo', (body) => body]]);
  wss.on('connection', (ws) =>
    ws.on('message', (data: Buffer) => {
      const [id, method, deadline, body] = codec.unpackRequest(data);
      const handler = handlers.get(method);
      const reply: Reply = handler === undefined ? [id, false, 'no such method'] : Date.now() > deadline ? [id, false, 'deadline'] : [id, true, handler(body)];
      ws.send(codec.packReply(reply));
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
    const [id, ok, body] = codec.unpackReply(data);
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
      client.send(codec.packRequest([id, method, Date.now() + DEADLINE_MS, body]));
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
