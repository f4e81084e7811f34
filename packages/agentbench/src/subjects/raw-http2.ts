import { connect, type ClientHttp2Session } from 'node:http2';
import { once } from 'node:events';
import type { Session, Subject } from './subject.js';

/**
 * Raw node:http2 over TLS 1.3 (h2): one request stream per echo, like one agentlink call per stream. `tuned`
 * raises the flow-control windows (8 MiB per stream, 32 MiB per session) as a throughput-minded user would;
 * otherwise node's defaults (64 KiB windows) stand, as most code runs them.
 */
export function rawHttp2Subject(url: string, tuned: boolean): Subject {
  return {
    name: tuned ? 'raw http2 (TLS)' : 'raw http2 (TLS, default windows)',
    async connect(): Promise<Session> {
      const session: ClientHttp2Session = connect(url, {
        rejectUnauthorized: false,
        minVersion: 'TLSv1.3',
        ...(tuned ? { settings: { initialWindowSize: 8 * 1024 * 1024 } } : {}),
      });
      await once(session, 'connect');
      if (tuned) session.setLocalWindowSize(32 * 1024 * 1024);
      const request = (path: string, method: string, body?: Buffer, onData?: (bytes: number) => void): Promise<number> =>
        new Promise((resolve, reject) => {
          const stream = session.request({ ':path': path, ':method': method });
          let received = 0;
          stream.on('data', (d: Buffer) => {
            received += d.length;
            onData?.(d.length);
          });
          stream.on('end', () => resolve(received));
          stream.on('error', reject);
          stream.end(body);
        });
      return {
        async echo(payload) {
          const received = await request('/echo', 'POST', payload);
          if (received !== payload.length) throw new Error('short echo');
        },
        download: (totalBytes, chunkBytes, pacing) =>
          request(`/download?total=${totalBytes}&chunk=${chunkBytes}&delay=${pacing?.delayMs ?? 0}`, 'GET', undefined, pacing?.onData),
        async close() {
          session.destroy();
        },
      };
    },
  };
}
