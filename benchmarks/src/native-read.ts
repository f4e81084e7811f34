import type { NativeConnection, NativeStream } from '@agentlink/quic';

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
