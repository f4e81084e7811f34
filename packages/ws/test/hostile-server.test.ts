import { createHash } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { AgentError, createAgent, Identity, type Agent } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { webSocket } from '../src/index.js';
import { MAX_BUFFERED_READS, MAX_FRAGMENTS } from '../src/web-socket-transport.js';

/**
 * The bounds ws enforces on what a peer sends (fragments per message, pongs owed, message size) are given to the
 * dialler as to the listener: an agent that dials a hostile server (a record can name any address) is as exposed.
 * The server here is written by hand on node:tls: it proves the key the agent dials, answers the upgrade, and then
 * does what no polite server does.
 */
const agents: Agent[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  for (const server of servers.splice(0)) server.close();
});

interface HostileServer {
  /** The agent address to dial (the hostile server holds the key it names). */
  address: string;
  /** The first upgraded connection. */
  connection: Promise<TLSSocket>;
}

async function hostileServer(): Promise<HostileServer> {
  const identity = Identity.generate();
  const { key, cert } = selfSignedCertificate(identity);
  const server = createServer({ key, cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false });
  servers.push(server);
  const connection = new Promise<TLSSocket>((resolve) => {
    server.on('secureConnection', (socket) => {
      socket.on('error', () => undefined);
      let head = '';
      const onData = (chunk: Buffer): void => {
        head += chunk.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        socket.off('data', onData);
        const clientKey = /sec-websocket-key:\s*(\S+)/i.exec(head)![1]!;
        const accept = createHash('sha1').update(`${clientKey}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
        resolve(socket);
      };
      socket.on('data', onData);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { address: `${identity.id}@wss://127.0.0.1:${port}/agentlink`, connection };
}

/** A dialling agent whose call to the hostile server is pending; resolves with how that call ended. */
async function dialler(address: string): Promise<{ agent: Agent; call: Promise<unknown> }> {
  const agent = await createAgent({ channels: [webSocket()] });
  agents.push(agent);
  const call = agent.send(address, 'echo', 'hello', { timeoutMs: 60_000 }).then(
    () => 'answered',
    (error: unknown) => error,
  );
  return { agent, call };
}

/** Everything the dialler sends (after the upgrade) until it closes. */
function collect(socket: TLSSocket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => socket.once('close', () => resolve(Buffer.concat(chunks))));
}
/** The status code of the first close frame (opcode 8, masked: 2 bytes of header, 4 of key) the dialler sent. */
function closeCode(received: Buffer): number | undefined {
  for (let at = received.indexOf(0x88); at >= 0; at = received.indexOf(0x88, at + 1)) {
    if ((received[at + 1]! & 0x80) === 0 || received.length < at + 8) continue;
    const mask = received.subarray(at + 2, at + 6);
    return ((received[at + 6]! ^ mask[0]!) << 8) | (received[at + 7]! ^ mask[1]!);
  }
  return undefined;
}

describe('an agent that dials a hostile WebSocket server', () => {
  it(`closes a message sent in more than ${MAX_FRAGMENTS} fragments (1008) and fails its call, typed`, async () => {
    const server = await hostileServer();
    const { call } = await dialler(server.address);
    const socket = await server.connection;
    const received = collect(socket);
    // One binary message that never ends: a 1-byte first fragment, then 1-byte continuations (server frames are
    // not masked).
    const fragment = (first: boolean): Buffer => Buffer.from([first ? 0x02 : 0x00, 1, 0x41]);
    const flood = Buffer.concat(Array.from({ length: 4 * MAX_FRAGMENTS }, (_, i) => fragment(i === 0)));
    socket.write(flood);
    expect(closeCode(await received)).toBe(1008);
    const error = await call;
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('UNAVAILABLE');
  });

  it(`closes a frame sent in more than ${MAX_BUFFERED_READS} TLS records while ws holds them (1008) and fails its call, typed`, async () => {
    const server = await hostileServer();
    const { call } = await dialler(server.address);
    const socket = await server.connection;
    const received = collect(socket);
    let isClosed = false;
    void received.then(() => (isClosed = true));
    // A binary frame declaring 64 KiB (within maxPayload), then its bytes one TLS record (one read at the dialler)
    // each: a write waits for the one before it, or node would join them into one record.
    const write = (bytes: Buffer): Promise<void> => new Promise((resolve) => socket.write(bytes, () => resolve()));
    await write(Buffer.from([0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]));
    for (let sent = 0; !isClosed && sent < 4 * MAX_BUFFERED_READS; sent++) await write(Buffer.from([0x41]));
    expect(closeCode(await received)).toBe(1008);
    expect(((await call) as AgentError).code).toBe('UNAVAILABLE');
  });

  it('terminates a server that floods pings and never reads the pongs (at most 60 owed)', async () => {
    const server = await hostileServer();
    const { call } = await dialler(server.address);
    const socket = await server.connection;
    socket.pause(); // never read again: the dialler's pongs fill the socket buffers, then its queue
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // 100,000 pings of 125 bytes (13 MB), written as fast as the dialler takes them.
    const ping = Buffer.concat([Buffer.from([0x89, 125]), Buffer.alloc(125, 0x70)]);
    const batch = Buffer.concat(Array.from({ length: 1000 }, () => ping));
    let sent = 0;
    let isClosed = false;
    void closed.then(() => (isClosed = true));
    for (let i = 0; i < 100 && !isClosed; i++) {
      sent++;
      if (!socket.write(batch)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed]);
    }
    await closed; // the dialler terminated it (the test's timeout bounds the wait)
    expect(sent).toBeLessThan(100); // before the flood was over
    const error = await call;
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('UNAVAILABLE');
  });

  it('closes a message declared larger than the largest mux frame at its header (1009)', async () => {
    const server = await hostileServer();
    const { call } = await dialler(server.address);
    const socket = await server.connection;
    const received = collect(socket);
    // A header declaring 64 KiB + 6 bytes (one more than the largest frame); before 2026-11-24 the dialler took
    // up to 1 MiB here.
    socket.write(Buffer.from([0x82, 126 + 1, 0, 0, 0, 0, 0, 1, 0, 6]));
    expect(closeCode(await received)).toBe(1009);
    expect(((await call) as AgentError).code).toBe('UNAVAILABLE');
  });
});
