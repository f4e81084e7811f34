import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { AgentError, createAgent, Identity, type Agent } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { http2 } from '../src/index.js';
import { frame, PING, SETTINGS } from './raw-frames.js';

/**
 * The dialler's side (an agent reaches whatever address a record names): a server written by hand on node:tls
 * holds the key the agent dials, speaks enough HTTP/2 to be taken for a server, then floods control frames it
 * never reads the answers to.
 */
const agents: Agent[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  for (const server of servers.splice(0)) server.close();
});


async function floodingServer(unit: Buffer): Promise<{ address: string; flooded: Promise<{ writes: number }> }> {
  const identity = Identity.generate();
  const { key, cert } = selfSignedCertificate(identity);
  const server = createServer({ key, cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false, ALPNProtocols: ['h2'] });
  servers.push(server);
  const flooded = new Promise<{ writes: number }>((resolve) => {
    server.once('secureConnection', (socket: TLSSocket) => {
      socket.on('error', () => undefined);
      socket.write(frame(SETTINGS, 0, Buffer.alloc(0)));
      socket.pause(); // never reads: every ACK the client owes stays with the client
      void (async () => {
        const closed = new Promise<void>((done) => socket.once('close', () => done()));
        const batch = Buffer.concat(Array.from({ length: 1000 }, () => unit));
        let writes = 0;
        for (; writes < 200 && !socket.destroyed; writes++) {
          if (!socket.write(batch)) await Promise.race([new Promise((drained) => socket.once('drain', drained)), closed]);
        }
        await closed;
        resolve({ writes });
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { address: `${identity.id}@h2://127.0.0.1:${port}/agentlink`, flooded };
}

describe('an agent dialling a hostile HTTP/2 server', () => {
  for (const [name, unit] of [
    ['PING', frame(PING, 0, Buffer.alloc(8, 0x70))],
    ['SETTINGS', frame(SETTINGS, 0, Buffer.from([0x00, 0x02, 0, 0, 0, 0]))],
  ] as const) {
    it(`${name} frames never acknowledged: the dialler closes the session before the flood ends, its call fails`, async () => {
      const server = await floodingServer(unit);
      const agent = await createAgent({ channels: [http2()] });
      agents.push(agent);
      const call = agent.send(server.address, 'ping', undefined, { timeoutMs: 60_000 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      const { writes } = await server.flooded;
      expect(writes).toBeLessThan(200); // 200,000 frames are never all taken
      expect(await call).toBeInstanceOf(AgentError);
    });
  }
});
