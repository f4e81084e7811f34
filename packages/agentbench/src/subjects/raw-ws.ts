import { once } from 'node:events';
import { WebSocket } from 'ws';
import type { Session, Subject } from './subject.js';

/** Raw `ws` over TLS 1.3: one socket, binary messages echoed, no framing or authentication of ours. */
export function rawWsSubject(url: string): Subject {
  return {
    name: 'raw ws (TLS)',
    async connect(): Promise<Session> {
      const ws = new WebSocket(url, { rejectUnauthorized: false, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
      await once(ws, 'open');
      // One request at a time per kind; concurrent echoes are matched in order (the server answers in order).
      const pending: Array<(data: Buffer) => void> = [];
      let onText: ((text: string) => void) | undefined;
      let onBinary: ((data: Buffer) => void) | undefined;
      ws.on('message', (data: Buffer, isBinary) => {
        if (!isBinary) return onText?.(data.toString());
        if (onBinary) return onBinary(data);
        pending.shift()?.(data);
      });
      return {
        echo(payload) {
          return new Promise<void>((resolve, reject) => {
            pending.push((data) => (data.length === payload.length ? resolve() : reject(new Error('short echo'))));
            ws.send(payload);
          });
        },
        download(totalBytes, chunkBytes, pacing) {
          return new Promise<number>((resolve) => {
            let received = 0;
            onBinary = (data) => {
              received += data.length;
              pacing?.onData?.(data.length);
            };
            onText = () => {
              onBinary = undefined;
              resolve(received);
            };
            ws.send(`download ${totalBytes} ${chunkBytes} ${pacing?.delayMs ?? 0}`);
          });
        },
        async close() {
          ws.terminate();
        },
      };
    },
  };
}
