/**
 * node:http2 alone, in the two shapes the HTTP/2 benchmarks compare (1 KB each way):
 * - `echo`: agentbench's baseline. The request ends with its body (END_STREAM on the DATA frame); the server
 *   answers at the request's end.
 * - `callShape`: what an agentlink call does on the wire. The request stays open after its body (the caller may
 *   still cancel), the server answers on the first bytes, and the caller ends its side once answered.
 */
import { once } from 'node:events';
import { connect, createSecureServer, type ClientHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Identity, selfSignedCertificate } from '@agentlink/core';

export const SHAPE_PAYLOAD = Buffer.alloc(1024, 1);
const CALL_HEADERS = { ':method': 'POST', ':path': '/call' };

/** A node:http2 TLS 1.3 server answering both shapes: `/echo` at the request's end, anything else at once. */
export async function serveShapes(): Promise<{ port: number; close(): void }> {
  const tls = selfSignedCertificate(Identity.generate());
  const server = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 << 20 } });
  server.on('stream', (stream, headers) => {
    if (headers[':path'] === '/echo') {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        stream.respond({ ':status': 200 });
        stream.end(Buffer.concat(parts));
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
  return {
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
