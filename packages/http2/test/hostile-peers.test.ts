import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError, Identity, createAgent, type Agent } from '@agentlink/core';
import { encodeFrame, selfSignedCertificate } from '@agentlink/core/transport';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { http2, type Http2Options } from '../src/index.js';
import { toHttp2Code } from '../src/reset-codes.js';
import { DEFAULT_MAX_SESSION_BUFFERED } from '../src/http2-channel.js';
import { expectIdleEvictionOnFakeClock, expectPerIpPlaceFreed, nextRefusal, requireTool, startAgentProcess, strangerCertificate, tcp, type AgentProcess, type PemFiles } from './hostile-helpers.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});
async function agent(options: Parameters<typeof http2>[0] = {}): Promise<Agent> {
  const created = await createAgent({ channels: [http2(options)] });
  agents.push(created);
  created.handle('echo', (body: unknown) => body);
  created.handle('slow', (ms: number) => sleep(ms).then(() => ms));
  return created;
}
const urlOf = (address: string): URL => new URL(address.slice(address.indexOf('@') + 1).replace('h2:', 'https:'));

/** A node:http2 client that is not an agent: it presents whatever certificate it was given. */
async function stranger(url: URL, pem?: Pick<PemFiles, 'key' | 'cert'>, settings = {}): Promise<ClientHttp2Session> {
  const session = connect(url.origin, { key: pem?.key, cert: pem?.cert, rejectUnauthorized: false, settings });
  session.on('error', () => undefined);
  return session;
}
function rstCodeOf(stream: ClientHttp2Stream): Promise<number | undefined> {
  stream.on('error', () => undefined);
  return new Promise((resolve) => stream.once('close', () => resolve(stream.rstCode)));
}
function curl(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--http2', '-k', '-sS', '--max-time', '10', ...args], (error, _stdout, stderr) => {
      resolve({ code: typeof error?.code === 'number' ? error.code : 0, stderr });
    });
  });
}

describe('HTTP/2 listener against hostile peers', () => {
  let pem: PemFiles;
  beforeAll(() => {
    pem = strangerCertificate('ed25519');
  });
  afterAll(() => pem.remove());

  describe('an agent in its own process', () => {
    let target: AgentProcess;
    beforeAll(async () => {
      target = await startAgentProcess({ port: 0 });
    });
    afterAll(() => target.stop());

    it('survives foreign requests (curl with a throwaway Ed25519 certificate, a raw client): each refused with PROTOCOL_ERROR', async () => {
      requireTool('curl');
      const url = urlOf(target.address);
      const refusedCode = String(toHttp2Code('PROTOCOL_ERROR'));
      const client = ['--cert', pem.certPath, '--key', pem.keyPath];
      const wrongPath = await curl([...client, `${url.origin}/`]);
      const wrongPost = await curl([...client, '-X', 'POST', '--data-binary', 'x', `${url.origin}/agentlink/nope`]);
      for (const result of [wrongPath, wrongPost]) {
        expect(result.code).not.toBe(0); // curl: the stream was reset
        expect(result.stderr).toContain(refusedCode);
      }
      // Garbage where a call is expected is refused by core (a reset before any handler).
      const garbage = await curl([...client, '-X', 'POST', '--data-binary', 'not a frame', `${url.origin}/agentlink`]);
      expect(garbage.code).not.toBe(0);

      const session = await stranger(url, pem);
      const reverse = session.request({ ':method': 'POST', ':path': '/agentlink/reverse' });
      reverse.on('error', () => undefined);
      // The server answers a reverse stream only when it first uses it; a ping's answer shows the request arrived
      // (node sends the request when connected, before a ping sent then; a ping before that is cancelled).
      if (session.connecting) await once(session, 'connect');
      await new Promise<void>((resolve, reject) => session.ping((error) => (error ? reject(error) : resolve())));
      const secondReverse = rstCodeOf(session.request({ ':method': 'POST', ':path': '/agentlink/reverse' }));
      const wrongMethod = rstCodeOf(session.request({ ':method': 'GET', ':path': '/agentlink' }));
      expect(await secondReverse).toBe(toHttp2Code('PROTOCOL_ERROR'));
      expect(await wrongMethod).toBe(toHttp2Code('PROTOCOL_ERROR'));
      session.destroy();

      const peer = await agent();
      expect(await peer.send(target.address, 'echo', 'still serving')).toBe('still serving');
      expect(target.child.exitCode).toBeNull();
      expect((await target.stats()).refusals['stream:not-agentlink']).toBe(4);
    });

    it('a zero-window peer holding 2 × 1,000 streaming calls costs bounded memory; a normal peer is served throughout', async () => {
      const url = urlOf(target.address);
      const before = await target.stats();
      const request = encodeFrame({ type: 'request', method: 'firehose', timeoutMs: null, priority: 'normal', metadata: {}, body: { itemBytes: 10 }, mode: 'stream' });
      const sessions: ClientHttp2Session[] = [];
      for (let s = 0; s < 2; s++) {
        // Never credits a byte: every stream's window is 0, and nothing is read.
        const session = await stranger(url, pem, { initialWindowSize: 0 });
        await once(session, 'remoteSettings');
        const answered: Promise<unknown>[] = [];
        for (let i = 0; i < 1000; i++) {
          const stream = session.request({ ':method': 'POST', ':path': '/agentlink' });
          stream.on('error', () => undefined);
          stream.write(request); // the request side stays open: the call goes on
          answered.push(once(stream, 'response'));
        }
        await Promise.all(answered);
        sessions.push(session);
      }
      // The handlers produce until each session's budget of unsent bytes is full, then wait. Core writes a
      // stream's items in batches of up to 20 KiB (ITEM_BATCH_BYTES and the frame that crossed it): the budget is
      // full once the next batch does not fit.
      const limit = DEFAULT_MAX_SESSION_BUFFERED;
      let during = await target.stats();
      while (during.buffered < 2 * (limit - 20 * 1024)) during = await target.stats();
      const peer = await agent();
      expect(await peer.send(target.address, 'echo', 'during')).toBe('during');
      during = await target.stats();
      expect(during.buffered).toBeLessThanOrEqual(2 * (limit + 64 * 1024 + 512));
      // What the agent holds after a GC: per session its budget's bytes in node, each in a batch buffer of up to
      // twice its size (batches grow by doubling), plus ~8 KiB of objects per stalled call.
      const held = during.heapUsed + during.arrayBuffers - (before.heapUsed + before.arrayBuffers);
      expect(held).toBeLessThan(2 * 2 * limit + 2000 * 8 * 1024);
      // RSS adds what V8 and the allocator keep of what was freed (the handlers' garbage grew the young
      // generation to 64 MiB on Node 24, 32 on Node 20). Before the budget: +430 MB for these two sessions.
      expect(during.rss - before.rss).toBeLessThan(192 * 1024 * 1024);

      for (const session of sessions) session.destroy();
      let after = await target.stats();
      while (after.buffered > 0) after = await target.stats();
      expect(await peer.send(target.address, 'echo', 'after')).toBe('after');
    });
  });

  describe('refusals carry their code to the peer', () => {
    it('a client without a certificate gets GOAWAY UNAUTHENTICATED right after the handshake, reported as no-certificate', async () => {
      const server = await agent({ port: 0 });
      const reported = nextRefusal((r) => r.kind === 'http2' && r.reason === 'no-certificate');
      const session = await stranger(urlOf(server.addresses[0]!));
      const [code] = (await once(session, 'goaway')) as [number];
      expect(code).toBe(toHttp2Code('UNAUTHENTICATED'));
      await new Promise((resolve) => session.once('close', resolve));
      expect(await reported).toMatchObject({ stage: 'handshake', code: 'UNAUTHENTICATED' });
      expect(server.stats().refusals['handshake:no-certificate']).toBe(1);
    });

    it('a certificate with another key type than Ed25519 gets GOAWAY UNAUTHENTICATED, reported as wrong-key-type', async () => {
      const server = await agent({ port: 0 });
      const ec = strangerCertificate('ec');
      try {
        const reported = nextRefusal((r) => r.kind === 'http2' && r.reason === 'wrong-key-type');
        const session = await stranger(urlOf(server.addresses[0]!), ec);
        const [code] = (await once(session, 'goaway')) as [number];
        expect(code).toBe(toHttp2Code('UNAUTHENTICATED'));
        expect((await reported).detail).toContain('Ed25519');
      } finally {
        ec.remove();
      }
    });

    it('our dialler reports a listener that refuses the session (GOAWAY PERMISSION_DENIED) with that code', async () => {
      const client = await agent();
      // A listener with a real agent key that refuses every session at once, as a connection gate does.
      const identity = Identity.generate();
      const { key, cert } = selfSignedCertificate(identity);
      const { createSecureServer } = await import('node:http2');
      const refusing = createSecureServer({ key, cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false });
      refusing.on('session', (session) => {
        session.on('error', () => undefined);
        session.destroy(new Error('refused'), toHttp2Code('PERMISSION_DENIED'));
      });
      await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
      try {
        const port = (refusing.address() as import('node:net').AddressInfo).port;
        const error = await client.send(`${identity.id}@h2://127.0.0.1:${port}`, 'echo', 1, { timeoutMs: 5000 }).catch((e: unknown) => e);
        expect((error as AgentError).code).toBe('PERMISSION_DENIED');
      } finally {
        refusing.close();
      }
    });

  });

  describe('handshakes and listener limits', () => {
    it('a socket that sends nothing is closed at handshakeTimeoutMs and reported as handshake-timeout', async () => {
      const server = await agent({ port: 0, limits: { handshakeTimeoutMs: 200 } });
      const reported = nextRefusal((r) => r.kind === 'http2' && r.reason === 'handshake-timeout');
      const socket = await tcp(Number(urlOf(server.addresses[0]!).port));
      await once(socket, 'close');
      expect((await reported).stage).toBe('handshake');
    });

    it('garbage instead of a TLS handshake is reported as handshake-failed with the TLS error', async () => {
      const server = await agent({ port: 0 });
      const reported = nextRefusal((r) => r.kind === 'http2' && r.reason === 'handshake-failed');
      const socket = await tcp(Number(urlOf(server.addresses[0]!).port));
      socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
      await once(socket, 'close');
      expect((await reported).detail).toBeTruthy();
    });

    it('a TLS client without a certificate loses its socket right after the handshake', async () => {
      const server = await agent({ port: 0 });
      const socket = tlsConnect({ host: '127.0.0.1', port: Number(urlOf(server.addresses[0]!).port), ALPNProtocols: ['h2'], rejectUnauthorized: false });
      socket.on('error', () => undefined);
      socket.resume(); // read to the end: the server's GOAWAY, then its close
      await once(socket, 'secureConnect');
      await once(socket, 'close'); // not node's header timeout (76-88 s): the test would time out
      expect(server.stats().refusals['handshake:no-certificate']).toBe(1);
    });

    it('connections over maxConnectionsPerIp are closed before TLS and reported; a closed one frees its place', async () => {
      await expectPerIpPlaceFreed('http2', agent, { maxConnections: 2, maxConnectionsPerIp: 1 }, (address) => Number(urlOf(address).port));
    });

    it('a full listener evicts the idle connection of the group holding the most for a smaller group, and says why', async () => {
      await expectIdleEvictionOnFakeClock('http2', agent);
    });

    it('new connections over the per-IP rate are refused (ip-rate)', async () => {
      const server = await agent({ port: 0, limits: { newConnectionsPerIpPerSecond: 1 } });
      const port = Number(urlOf(server.addresses[0]!).port);
      const reported = nextRefusal((r) => r.kind === 'http2' && r.reason === 'ip-rate');
      // A burst of 5 s worth (5) is allowed; 8 at once cannot all pass.
      const sockets = await Promise.all(Array.from({ length: 8 }, () => tcp(port)));
      expect((await reported).stage).toBe('connection');
      for (const socket of sockets) socket.destroy();
    });

    it('limits are validated: a non-positive value is INVALID_ARGUMENT', async () => {
      const error = await createAgent({ channels: [http2({ port: 0, limits: { maxConnections: 0 } })] }).catch((e: unknown) => e);
      expect((error as AgentError).code).toBe('INVALID_ARGUMENT');
    });

    it("each option is checked when the transport is made: windows within HTTP/2's range, timers within node's", () => {
      const invalid: Array<[keyof Http2Options, number]> = [
        ['streamWindow', 0],
        ['streamWindow', 2 ** 31], // above RFC 9113's largest window: node threw at each connection
        ['sessionWindow', Number.NaN],
        ['maxConcurrentStreams', 0],
        ['keepaliveIntervalMs', Number.NaN], // setInterval(NaN) pinged every millisecond
        ['keepaliveIntervalMs', 2 ** 31], // node's timers fire after 1 ms above 2^31 − 1
        ['keepaliveTimeoutMs', 0],
        ['connectTimeoutMs', -1],
      ];
      for (const [name, value] of invalid) {
        expect(() => http2({ [name]: value })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(name) }));
      }
      expect(() => http2({ keepaliveIntervalMs: 0, streamWindow: 2 ** 31 - 1 })).not.toThrow(); // 0 turns pings off
    });
  });
});
