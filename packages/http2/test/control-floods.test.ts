import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { Identity, createAgent, type Agent } from '@agentlink/core';
import { secureContextOf, selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { http2 } from '../src/index.js';
import { frame, PING, PREFACE, SETTINGS } from './raw-frames.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

const ping = frame(PING, 0, Buffer.alloc(8, 0x70));
/** SETTINGS_ENABLE_PUSH 0: a valid setting the server must acknowledge. */
const settings = frame(SETTINGS, 0, Buffer.from([0x00, 0x02, 0, 0, 0, 0]));

/** A TLS client with a fresh agent key that speaks HTTP/2 by hand and never reads what the server sends. */
async function floodingPeer(port: number): Promise<TLSSocket> {
  const socket = tlsConnect({ host: '127.0.0.1', port, ALPNProtocols: ['h2'], secureContext: secureContextOf(selfSignedCertificate(Identity.generate())), rejectUnauthorized: false });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  socket.pause(); // never reads: every ACK the server owes stays with the server
  socket.write(Buffer.concat([PREFACE, frame(SETTINGS, 0, Buffer.alloc(0))]));
  return socket;
}

/** Writes `unit` ×1,000 per write, 200 times, as fast as the server takes it; resolves with the writes made before it closed us. */
async function flood(socket: TLSSocket, unit: Buffer): Promise<number> {
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const batch = Buffer.concat(Array.from({ length: 1000 }, () => unit));
  let writes = 0;
  for (; writes < 200 && !socket.destroyed; writes++) {
    if (!socket.write(batch)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed]);
  }
  await closed; // the server closes the flooder (the test's timeout bounds the wait)
  return writes;
}

describe('HTTP/2 control frames from a peer that does not read', () => {
  for (const [name, unit] of [['PING', ping], ['SETTINGS', settings]] as const) {
    it(`a ${name} flood whose ACKs nobody reads is closed, and others are served`, async () => {
      const server = await createAgent({ channels: [http2({ port: 0 })] });
      agents.push(server);
      server.handle('echo', (body: unknown) => body);
      const port = Number(new URL(server.addresses[0]!.slice(server.addresses[0]!.indexOf('@') + 1)).port);
      const writes = await flood(await floodingPeer(port), unit);
      expect(writes).toBeLessThan(200); // closed before the flood was over
      const client = await createAgent({ channels: [http2()] });
      agents.push(client);
      expect(await client.send(server.addresses[0]!, 'echo', 'still here')).toBe('still here');
    });
  }
});
