import { Identity, publicKeyFromAgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, expect, it } from 'vitest';
import { loadNative, type NativeBinding, type NativeConnection, type NativeStream } from '../src/native.js';

const cleanups: (() => void)[] = [];
afterEach(() => cleanups.splice(0).forEach((cleanup) => cleanup()));

function binding(): NativeBinding {
  const native = loadNative();
  if (!native.ok) throw new Error(native.reason);
  return native.binding;
}

/** A listening endpoint and a client connected to it: the two ends of one engine connection. */
async function connectedPair(): Promise<{ client: NativeConnection; server: NativeConnection }> {
  const engine = binding();
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const listener = await engine.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: true });
  const clientTls = selfSignedCertificate(Identity.generate());
  const dialer = await engine.bindEndpoint({ host: '127.0.0.1', port: 0, cert: clientTls.certDer, key: clientTls.keyDer, accept: false });
  cleanups.push(() => {
    dialer.close(0, 'done');
    listener.close(0, 'done');
  });
  const accepted = listener.accept();
  const client = await dialer.dial('127.0.0.1', listener.localPort, Buffer.from(publicKeyFromAgentId(identity.id)), 5000).connection();
  const server = await accepted;
  if (!server) throw new Error('listener closed');
  return { client, server };
}

async function readAll(stream: NativeStream): Promise<string> {
  const parts: Buffer[] = [];
  for (;;) {
    const data = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
    if (!data || data.length === 0) return Buffer.concat(parts).toString();
    parts.push(data);
  }
}

it('acceptStreams hands over every stream the peer opened, in order, in batches of at least one; empty once the connection closed', async () => {
  const { client, server } = await connectedPair();
  const count = 40;
  for (let index = 0; index < count; index++) {
    const stream = client.tryOpenStream() ?? (await client.openStream());
    expect(stream.tryWrite(Buffer.from(String(index)))).toBe(String(index).length);
    expect(stream.tryFinish()).toBe(true);
  }
  const accepted: NativeStream[] = [];
  while (accepted.length < count) {
    const batch = await server.acceptStreams();
    expect(batch.length).toBeGreaterThan(0);
    expect(batch.length).toBeLessThanOrEqual(64);
    accepted.push(...batch);
  }
  expect(accepted).toHaveLength(count);
  const bodies = await Promise.all(accepted.map(readAll));
  expect(bodies).toEqual(Array.from({ length: count }, (_, index) => String(index)));
  for (const stream of accepted) stream.release();

  client.close(0, 'done');
  await server.closed();
  await expect(server.acceptStreams()).resolves.toEqual([]);
  client.release();
  server.release();
});

it('a released stream lets go of its halves in the call: reading or writing it fails at once', async () => {
  const { client, server } = await connectedPair();
  const stream = client.tryOpenStream() ?? (await client.openStream());
  expect(stream.tryWrite(Buffer.from('x'))).toBe(1);
  stream.release();
  expect(() => stream.tryRead(16)).toThrow(/CLOSED/);
  expect(() => stream.tryWrite(Buffer.from('y'))).toThrow(/CLOSED/);
  client.close(0, 'done');
  client.release();
  server.release();
});

it('tryWriteFinish writes and ends a stream in one call: the peer reads the bytes, then the end', async () => {
  const { client, server } = await connectedPair();
  const stream = client.tryOpenStream() ?? (await client.openStream());
  expect(stream.tryWriteFinish(Buffer.from('whole request'))).toBe('whole request'.length);
  expect(() => stream.tryWrite(Buffer.from('late'))).toThrow(/CLOSED/); // finished: nothing more may be written
  const [accepted] = await server.acceptStreams();
  expect(await readAll(accepted!)).toBe('whole request');
  accepted!.release();
  stream.release();
  client.close(0, 'done');
  client.release();
  server.release();
});
