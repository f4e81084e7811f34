import { Identity, publicKeyFromAgentId, type AgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import type { NativeBinding, NativeEndpoint, NativeStream } from '@agentlink/quic';
import type { Session, Subject } from './subject.js';

/**
 * The QUIC engine alone (quinn via the addon), without agentlink's framing, codec or dispatch, used the way
 * the channel uses it (synchronous fast paths first) so the comparison isolates agentlink's own cost.
 */
export function rawQuicSubject(binding: NativeBinding, target: { host: string; port: number; key: string }): Subject {
  const tls = selfSignedCertificate(Identity.generate());
  let endpoint: Promise<NativeEndpoint> | undefined;
  return {
    name: 'raw QUIC engine',
    async connect(): Promise<Session> {
      endpoint ??= binding.bindEndpoint({ host: '0.0.0.0', port: 0, cert: tls.certDer, key: tls.keyDer, accept: false });
      const connection = await (await endpoint).dial(target.host, target.port, Buffer.from(publicKeyFromAgentId(target.key as AgentId)), 5000).connection();
      const exchange = async (request: Buffer, onData?: (bytes: number) => void): Promise<number> => {
        const stream = connection.tryOpenStream() ?? (await connection.openStream());
        // Written and ended in one call, as the channel's last writes are (`tryWriteFinish`).
        const taken = stream.tryWriteFinish(request);
        if (taken < request.length) {
          await stream.write(request.subarray(taken));
          if (!stream.tryFinish()) await stream.finish();
        }
        return readAll(stream, onData);
      };
      return {
        async echo(payload) {
          const received = await exchange(Buffer.concat([Buffer.from([0]), payload]));
          if (received !== payload.length) throw new Error('short echo');
        },
        download(totalBytes, chunkBytes, pacing) {
          const request = Buffer.alloc(13);
          request[0] = 1;
          request.writeUInt32BE(totalBytes, 1);
          request.writeUInt32BE(chunkBytes, 5);
          request.writeUInt32BE(pacing?.delayMs ?? 0, 9);
          return exchange(request, pacing?.onData);
        },
        async close() {
          connection.close(0, 'done');
          connection.release();
        },
      };
    },
    async dispose() {
      const disposed = endpoint;
      endpoint = undefined; // a later connect() binds afresh
      (await disposed)?.close(0, 'done');
    },
  };
}

async function readAll(stream: NativeStream, onData?: (bytes: number) => void): Promise<number> {
  let received = 0;
  for (;;) {
    const data = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
    if (!data || data.length === 0) break; // null or empty: the peer finished
    received += data.length;
    onData?.(data.length);
  }
  stream.release();
  return received;
}
