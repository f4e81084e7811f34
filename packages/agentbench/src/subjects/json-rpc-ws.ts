import { once } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { Identity, type AgentId } from '@agentlink/core';
import { authenticatePeer, selfSignedCertificate } from '@agentlink/core/transport';
import { WebSocket } from 'ws';
import type { Session, Subject } from './subject.js';

/** One JSON-RPC 2.0 message as this subject and its server use them (a request, a response, or a notification). */
export interface JsonRpcMessage {
  jsonrpc: '2.0';
  id?: number;
  method?: string;
  params?: { data?: string; total?: number; chunk?: number; delayMs?: number; call?: number };
  result?: unknown;
  error?: { code: number; message: string };
}

/**
 * What a user writes in an afternoon instead of agentlink: `ws` with JSON.stringify/parse, requests matched by
 * id, bytes as base64 strings (JSON has no binary), a streamed reply as notifications then the response. Same
 * mutual TLS as agentlink's ws channel: TLS 1.3, both sides present a self-signed certificate of an Ed25519
 * key, and each pins the other's key. No flow control, no cancellation, no deadlines: the baseline of cost.
 */
export function jsonRpcWsSubject(target: { url: string; key: string }): Subject {
  const tls = selfSignedCertificate(Identity.generate());
  return {
    name: 'JSON-RPC over ws (TLS)',
    async connect(): Promise<Session> {
      const ws = new WebSocket(target.url, { key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', rejectUnauthorized: false, perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
      ws.once('upgrade', (response) => authenticatePeer(response.socket as TLSSocket, target.key as AgentId));
      await once(ws, 'open');
      let nextId = 1;
      const calls = new Map<number, { resolve(message: JsonRpcMessage): void; onChunk?(data: string): void }>();
      ws.on('message', (data: Buffer) => {
        const message = JSON.parse(data.toString()) as JsonRpcMessage;
        if (message.method === 'chunk') return calls.get(message.params!.call!)?.onChunk?.(message.params!.data!);
        const call = calls.get(message.id!);
        calls.delete(message.id!);
        call?.resolve(message);
      });
      const request = (method: string, params: JsonRpcMessage['params'], onChunk?: (data: string) => void): Promise<JsonRpcMessage> =>
        new Promise((resolve) => {
          const id = nextId++;
          calls.set(id, { resolve, onChunk });
          ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
        });
      return {
        async echo(payload) {
          const reply = await request('echo', { data: payload.toString('base64') });
          if (typeof reply.result !== 'string' || Buffer.from(reply.result, 'base64').length !== payload.length) throw new Error('short echo');
        },
        async download(totalBytes, chunkBytes, pacing) {
          let received = 0;
          await request('download', { total: totalBytes, chunk: chunkBytes, delayMs: pacing?.delayMs ?? 0 }, (data) => {
            const bytes = Buffer.from(data, 'base64').length;
            received += bytes;
            pacing?.onData?.(bytes);
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
