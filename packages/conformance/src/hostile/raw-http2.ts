import { once } from 'node:events';
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type Settings } from 'node:http2';
import { Identity } from '@agentlink/core';
import { secureContextOf, selfSignedCertificate } from '@agentlink/core/transport';

/**
 * An HTTP/2 client at node:http2, below the agentlink channel, authenticated with a fresh key: for attacks in
 * HTTP/2 itself (a zero flow-control window, wrong paths and methods, extra reverse streams).
 */
export async function rawHttp2Session(url: URL, settings: Settings = {}): Promise<ClientHttp2Session> {
  const identity = Identity.generate();
  const session = connect(`https://${url.host}`, {
    secureContext: secureContextOf(selfSignedCertificate(identity)),
    ALPNProtocols: ['h2'],
    rejectUnauthorized: false,
    settings,
  });
  session.on('error', () => undefined); // 'close' follows
  await once(session, 'connect');
  return session;
}

/** How the server answered one request: its :status (0 when none) and the RST_STREAM code (0 when none). */
export interface Http2Outcome {
  status: number;
  rstCode: number;
}

/** Sends one request and waits for the server to finish with it (an answer, a reset or the session closing). */
export function http2Outcome(session: ClientHttp2Session, headers: Record<string, string>, body?: Uint8Array): Promise<Http2Outcome> {
  return new Promise((resolve) => {
    let status = 0;
    const stream: ClientHttp2Stream = session.request(headers, { endStream: body === undefined });
    stream.on('response', (h) => void (status = Number(h[':status'] ?? 0)));
    stream.on('error', () => undefined);
    stream.resume();
    stream.once('close', () => resolve({ status, rstCode: stream.rstCode ?? 0 }));
    if (body !== undefined) stream.end(body);
  });
}
