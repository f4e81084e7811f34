/**
 * node:http2 alone, in the two shapes the HTTP/2 benchmarks compare (1 KB each way):
 * - `echo`: agentbench's baseline. The request ends with its body (END_STREAM on the DATA frame); the server
 *   answers at the request's end.
 * - `callShape`: what an agentlink call does on the wire. The request stays open after its body (the caller may
 *   still cancel), the server answers on the first bytes, and the caller ends its side once answered.
 * - `callShapeWithCodec`: the call shape carrying agentlink's wire format and nothing else of agentlink: a request
 *   frame out, a response frame back, each encoded with msgpackr and decoded and zod-checked by core's codec on
 *   receipt. No call objects, deadlines, pool or dispatch: the floor under any SDK speaking the protocol.
 * - `callShapeWithMsgpack`: the same frames decoded by msgpackr without validation, which prices zod's share.
 */
import { once } from 'node:events';
import { connect, createSecureServer, type ClientHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Identity } from '@agentlink/core';
import { decodePayload, encodeFrame, selfSignedCertificate, type WireMessage } from '@agentlink/core/transport';
import { Packr } from 'msgpackr';
import { answerEcho } from './http2-echo.js';

export const SHAPE_PAYLOAD = Buffer.alloc(1024, 1);
const CALL_HEADERS = { ':method': 'POST', ':path': '/call' };
const CODEC_HEADERS = { ':method': 'POST', ':path': '/codec' };
const MSGPACK_HEADERS = { ':method': 'POST', ':path': '/msgpack' };
const REQUEST: WireMessage = { type: 'request', method: 'echo', timeoutMs: 30_000, priority: 'normal', metadata: {}, body: SHAPE_PAYLOAD, mode: 'unary' };
/** Decoding without validation, for comparison only: core's codec options (plain MessagePack, no records). */
const unvalidated = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number', mapsAsObjects: true });
/** A frame is 4 bytes of length, then msgpack; on loopback a 1 KB frame arrives in one chunk. */
const payloadOf = (chunk: Buffer): Buffer => chunk.subarray(4);

/** A node:http2 TLS 1.3 server for every shape: `/echo` answers at the request's end, the others on its first bytes. */
export async function serveShapes(): Promise<{ port: number; close(): void }> {
  const tls = selfSignedCertificate(Identity.generate());
  const server = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 << 20 } });
  server.on('stream', (stream, headers) => {
    if (headers[':path'] === '/echo') return answerEcho(stream);
    if (headers[':path'] === '/codec') {
      stream.on('data', (d: Buffer) => {
        const request = decodePayload(payloadOf(d));
        stream.respond({ ':status': 200 });
        stream.end(encodeFrame(request.type === 'request' ? { type: 'response', body: request.body } : { type: 'end' }));
      });
      return;
    }
    if (headers[':path'] === '/msgpack') {
      stream.on('data', (d: Buffer) => {
        const request = unvalidated.unpack(payloadOf(d)) as unknown[];
        stream.respond({ ':status': 200 });
        stream.end(encodeFrame({ type: 'response', body: request[5] }));
      });
      return;
    }
    let answered = false;
    stream.on('data', (d: Buffer) => {
      if (answered) return;
      answered = true;
      stream.respond({ ':status': 200 });
      stream.end(d);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

export interface ShapeClient {
  echo(): Promise<void>;
  /** The call shape plus agentlink's wire work and nothing else: msgpack frames, zod-checked on both sides. */
  callShapeWithCodec(): Promise<void>;
  /** The same frames, decoded without validation. */
  callShapeWithMsgpack(): Promise<void>;
  callShape(): Promise<void>;
  /** The call shape with `request(headers, { endStream: false })`: node's request() is slower with any options. */
  callShapeWithOptions(): Promise<void>;
  close(): void;
}

export async function shapeClient(port: number): Promise<ShapeClient> {
  const session: ClientHttp2Session = connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false, settings: { initialWindowSize: 8 << 20 } });
  await once(session, 'connect');
  const callShape = (withOptions: boolean) => (): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = withOptions ? session.request(CALL_HEADERS, { endStream: false }) : session.request(CALL_HEADERS);
      stream.once('data', () => {
        resolve();
        stream.end();
      });
      stream.on('end', () => undefined);
      stream.on('error', reject);
      stream.write(SHAPE_PAYLOAD);
    });
  const framedCall = (headers: typeof CODEC_HEADERS, isResponse: (payload: Buffer) => boolean) => (): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = session.request(headers);
      stream.once('data', (d: Buffer) => {
        if (isResponse(payloadOf(d))) resolve();
        else reject(new Error('the server did not answer with a response frame'));
        stream.end();
      });
      stream.on('end', () => undefined);
      stream.on('error', reject);
      stream.write(encodeFrame(REQUEST));
    });
  return {
    callShapeWithCodec: framedCall(CODEC_HEADERS, (payload) => decodePayload(payload).type === 'response'),
    callShapeWithMsgpack: framedCall(MSGPACK_HEADERS, (payload) => (unvalidated.unpack(payload) as unknown[])[0] === 2),
    echo: () =>
      new Promise((resolve, reject) => {
        const stream = session.request({ ':method': 'POST', ':path': '/echo' });
        stream.on('data', () => undefined);
        stream.on('end', resolve);
        stream.on('error', reject);
        stream.end(SHAPE_PAYLOAD);
      }),
    callShape: callShape(false),
    callShapeWithOptions: callShape(true),
    close: () => session.destroy(),
  };
}
