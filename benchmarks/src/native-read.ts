import type { NativeConnection, NativeEndpoint, NativeStream } from '@agentlink/quic';

/** Everything the peer sends on a raw engine stream, up to its end (the raw QUIC subjects' request reader). */
export async function readAll(stream: Pick<NativeStream, 'tryRead' | 'read'>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (;;) {
    const data = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
    if (!data || data.length === 0) break; // null or empty: the peer finished
    parts.push(data);
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** Opens a raw engine stream asking the raw burst server for `count` tokens (a u32), its side finished. */
export async function requestBurst(connection: Pick<NativeConnection, 'tryOpenStream' | 'openStream'>, count: number): Promise<NativeStream> {
  const stream = connection.tryOpenStream() ?? (await connection.openStream());
  const request = Buffer.alloc(4);
  request.writeUInt32BE(count, 0);
  const taken = stream.tryWrite(request);
  if (taken < request.length) await stream.write(request.subarray(taken));
  if (!stream.tryFinish()) await stream.finish();
  return stream;
}

/**
 * Serves every stream of every connection `endpoint` accepts with `serve`, in the background (streams arrive in
 * batches, as the QUIC channel takes them); a stream that fails is dropped.
 */
export function serveStreams(endpoint: Pick<NativeEndpoint, 'accept'>, serve: (stream: NativeStream) => Promise<void>): void {
  void (async () => {
    for (let connection = await endpoint.accept(); connection; connection = await endpoint.accept()) {
      const accepted = connection;
      void (async () => {
        for (let batch = await accepted.acceptStreams(); batch.length > 0; batch = await accepted.acceptStreams()) {
          for (const stream of batch) void serve(stream).catch(() => undefined);
        }
      })();
    }
  })();
}
