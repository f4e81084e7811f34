import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { AgentError, createAgent, diagnosticChannels, type Agent } from '@agentlink/core';
import { MIN_IDLE_MS_BEFORE_EVICTION } from '@agentlink/core/transport';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
// The stranger's tools are shared with the HTTP/2 channel's tests.
import { expectIdleEvictionOnFakeClock, expectPerIpPlaceFreed, nextRefusal, requireTool, strangerCertificate, tcp, type PemFiles } from '../../http2/test/hostile-helpers.js';
import { webSocket, type WebSocketOptions } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});
async function agent(options: WebSocketOptions = {}): Promise<Agent> {
  const created = await createAgent({ channels: [webSocket(options)] });
  agents.push(created);
  created.handle('echo', (body: unknown) => body);
  created.handle('slow', (ms: number) => sleep(ms).then(() => ms));
  return created;
}
const portOf = (address: string): number => Number(new URL(address.slice(address.indexOf('@') + 1)).port);

/** A TLS client that is not an agent; resolves with everything the server sent before it closed. */
async function tlsStranger(port: number, options: ConnectionOptions = {}, send?: string): Promise<string> {
  const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options });
  socket.on('error', () => undefined);
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  await once(socket, 'secureConnect');
  if (send) socket.write(send);
  await once(socket, 'close'); // within the test's timeout, not node's header timeout (76-88 s)
  return received;
}
function curl(args: string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile('curl', ['-k', '-sS', '--max-time', '10', '-o', '/dev/null', '-w', '%{http_code}', ...args], (_error, stdout) => resolve(stdout));
  });
}

describe('WebSocket listener against hostile peers', () => {
  let pem: PemFiles;
  beforeAll(() => {
    pem = strangerCertificate('ed25519');
  });
  afterAll(() => pem.remove());

  it('an agent in its own process survives foreign requests and sockets reset mid-upgrade', async () => {
    requireTool('curl');
    const script = fileURLToPath(new URL('../../conformance/src/peer-process.ts', import.meta.url));
    const spec = { module: new URL('../src/index.ts', import.meta.url).href, factory: 'webSocket', listenOptions: { port: 0 } };
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script, JSON.stringify(spec)], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(child.stdout!, 'data')) as [Buffer];
      const address = (JSON.parse(line.toString()) as { address: string }).address;
      const origin = `https://127.0.0.1:${portOf(address)}`;
      const client = ['--cert', pem.certPath, '--key', pem.keyPath];
      expect(await curl([...client, `${origin}/`])).toBe('426');
      const upgrade = ['-H', 'connection: upgrade', '-H', 'upgrade: websocket', '-H', 'sec-websocket-version: 13'];
      expect(await curl([...client, ...upgrade, '-H', 'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==', `${origin}/nope`])).toBe('404');
      expect(await curl([...client, ...upgrade, '-H', 'sec-websocket-key: bad', `${origin}/agentlink`])).toBe('400');
      expect(await curl([`${origin}/agentlink`])).toBe('401'); // no certificate
      // Upgrade requests (accepted, and refused with 404) whose socket is reset at once: the server must not crash
      // on the socket's error.
      for (let i = 0; i < 5; i++) {
        const raw = await tcp(portOf(address));
        const socket = tlsConnect({ socket: raw, key: pem.key, cert: pem.cert, rejectUnauthorized: false });
        socket.on('error', () => undefined);
        await once(socket, 'secureConnect');
        socket.write(`GET ${i % 2 === 0 ? '/agentlink' : '/nope'} HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
        raw.resetAndDestroy(); // TCP RST under the TLS session
      }
      const peer = await agent();
      expect(await peer.send(address, 'echo', 'still serving')).toBe('still serving');
      expect(child.exitCode).toBeNull();
    } finally {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    }
  });

  it('a TLS client without a certificate gets 401 and loses its socket right after the handshake (no-certificate)', async () => {
    const server = await agent({ port: 0 });
    const reported = nextRefusal((r) => r.kind === 'ws' && r.reason === 'no-certificate');
    const received = await tlsStranger(portOf(server.addresses[0]!)); // sends nothing at all
    expect(received.startsWith('HTTP/1.1 401')).toBe(true);
    expect(await reported).toMatchObject({ stage: 'handshake', code: 'UNAUTHENTICATED' });
  });

  it('a certificate with another key type gets 401 (wrong-key-type)', async () => {
    const server = await agent({ port: 0 });
    const ec = strangerCertificate('ec');
    try {
      const reported = nextRefusal((r) => r.kind === 'ws' && r.reason === 'wrong-key-type');
      const received = await tlsStranger(portOf(server.addresses[0]!), { key: ec.key, cert: ec.cert });
      expect(received.startsWith('HTTP/1.1 401')).toBe(true);
      expect((await reported).detail).toContain('Ed25519');
    } finally {
      ec.remove();
    }
  });

  it('a socket that sends nothing is closed at handshakeTimeoutMs (handshake-timeout)', async () => {
    const server = await agent({ port: 0, limits: { handshakeTimeoutMs: 200 } });
    const reported = nextRefusal((r) => r.kind === 'ws' && r.reason === 'handshake-timeout');
    const socket = await tcp(portOf(server.addresses[0]!));
    await once(socket, 'close');
    expect((await reported).stage).toBe('handshake');
  });

  it('connections over maxConnectionsPerIp are closed before TLS and reported; a closed one frees its place', async () => {
    await expectPerIpPlaceFreed('ws', agent, { maxConnectionsPerIp: 1 }, portOf);
  });

  it('a full listener evicts the idle connection of the group holding the most for a smaller group, and says why', async () => {
    await expectIdleEvictionOnFakeClock('ws', agent);
  });

  it('a connection that never starts its TLS handshake is idle since it arrived: evicted by closing its socket, reported once', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    try {
      const server = await agent({ port: 0, limits: { maxConnections: 2, maxConnectionsPerIp: 2 } });
      const port = portOf(server.addresses[0]!);
      const silent = [await tcp(port, '127.0.0.2'), await tcp(port, '127.0.0.2')];
      const reasons: string[] = [];
      const seen = (message: unknown): void => void reasons.push((message as { reason: string }).reason);
      diagnosticChannels.peerRefused.subscribe(seen);
      vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
      const honest = await agent({ localAddress: '127.0.0.1' });
      expect(await honest.send(server.addresses[0]!, 'echo', 'in')).toBe('in');
      if (!silent[0]!.closed) await once(silent[0]!, 'close'); // the one idle the longest
      expect(silent[1]!.destroyed).toBe(false);
      diagnosticChannels.peerRefused.unsubscribe(seen);
      expect(reasons).toEqual(['evicted']); // its socket's failed TLS handshake is not reported again
      for (const socket of silent) socket.destroy();
    } finally {
      vi.useRealTimers();
    }
  });

  it('new connections over the per-IP rate are refused (ip-rate); admitConnection still runs after the limits', async () => {
    const server = await agent({ port: 0, limits: { newConnectionsPerIpPerSecond: 1 } });
    const reported = nextRefusal((r) => r.kind === 'ws' && r.reason === 'ip-rate');
    const sockets = await Promise.all(Array.from({ length: 8 }, () => tcp(portOf(server.addresses[0]!))));
    expect((await reported).stage).toBe('connection');
    for (const socket of sockets) socket.destroy();

    const asked: string[] = [];
    const gated = await agent({ port: 0, admitConnection: (ip) => (asked.push(ip), false) });
    const refused = nextRefusal((r) => r.kind === 'ws' && r.reason === 'admit-connection');
    const socket = await tcp(portOf(gated.addresses[0]!));
    await once(socket, 'close');
    expect((await refused).stage).toBe('connection');
    expect(asked).toEqual(['127.0.0.1']);
  });
});
