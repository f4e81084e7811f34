import { once } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { Identity, type AgentId } from '@agentlink/core';
import { authenticatePeer, selfSignedCertificate } from '@agentlink/core/transport';
import { WebSocket } from 'ws';
import type { Session, Subject } from './subject.js';

/** What a reply message carries after its id. */
export enum BinaryReply {
  response = 0,
  item = 1,
  error = 2,
}

export interface BinaryRequest {
  id: number;
  method: string;
  body: Buffer;
}

/** A reply's header: u32 id, u8 kind. */
export function replyHeader(out: Buffer, id: number, kind: BinaryReply): void {
  out.writeUInt32BE(id, 0);
  out[4] = kind;
}

/**
 * The floor of any RPC over ws: the least request/response framing anyone could write on the same socket as
 * agentlink's ws channel. A request is one binary message, u32 id, u8 method length, the method, the body; a
 * reply is u32 id, u8 kind (response, item of a streamed reply, error), the body, read as a view where it lies.
 * Calls are matched by id in a Map. No codec, deadlines, cancellation or flow control: so this ÷ raw ws is what
 * any request/response protocol over ws pays for an id and a method name, and agentlink ws ÷ this is what
 * agentlink's calls cost beyond them. Same mutual TLS as the JSON-RPC subject (TLS 1.3, both sides present an
 * Ed25519 self-signed certificate, each pins the other's key); ws's default random masking, as a user's client has.
 */
export function binaryRpcWsSubject(target: { url: string; key: string }): Subject {
  const tls = selfSignedCertificate(Identity.generate());
  return {
    name: 'binary RPC over ws (TLS)',
    baseline: 'raw ws (TLS)',
    async connect(): Promise<Session> {
      const ws = new WebSocket(target.url, { key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', rejectUnauthorized: false, perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
      ws.once('upgrade', (response) => authenticatePeer(response.socket as TLSSocket, target.key as AgentId));
      await once(ws, 'open');
      let nextId = 0;
      const calls = new Map<number, { resolve(body: Buffer): void; reject(error: Error): void; onItem?(body: Buffer): void }>();
      ws.on('message', (data: Buffer) => {
        if (data.length < 5) return; // not a reply: no call to settle
        const id = data.readUInt32BE(0);
        const call = calls.get(id);
        if (call === undefined) return;
        const kind = data[4] as BinaryReply;
        if (kind === BinaryReply.item) return call.onItem?.(data.subarray(5));
        calls.delete(id);
        if (kind === BinaryReply.response) call.resolve(data.subarray(5));
        else call.reject(new Error(data.subarray(5).toString()));
      });
      const request = (method: string, body: Uint8Array, onItem?: (body: Buffer) => void): Promise<Buffer> =>
        new Promise((resolve, reject) => {
          const id = ++nextId >>> 0;
          calls.set(id, { resolve, reject, onItem });
          const out = Buffer.allocUnsafe(5 + method.length + body.length);
          out.writeUInt32BE(id, 0);
          out[4] = method.length;
          for (let i = 0; i < method.length; i++) out[5 + i] = method.charCodeAt(i); // no crossing into C++ per call
          out.set(body, 5 + method.length);
          ws.send(out);
        });
      return {
        async echo(payload) {
          const reply = await request('echo', payload);
          if (reply.length !== payload.length) throw new Error('short echo');
        },
        async download(totalBytes, chunkBytes, pacing) {
          const params = Buffer.allocUnsafe(12);
          params.writeUInt32BE(totalBytes, 0);
          params.writeUInt32BE(chunkBytes, 4);
          params.writeUInt32BE(pacing?.delayMs ?? 0, 8);
          let received = 0;
          await request('download', params, (body) => {
            received += body.length;
            pacing?.onData?.(body.length);
          });
          return received;
        },
        async close() {
          ws.terminate();
        },
      };
    },
  };
}
