import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import {
  AgentError,
  createAgent,
  diagnosticChannels,
  Identity,
  type Agent,
  type ErrorCode,
  type Refusal,
} from '@agentlink/core';
import { MIN_IDLE_MS_BEFORE_EVICTION, selfSignedCertificate, type Channel } from '@agentlink/core/transport';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { expectIdleEviction } from '../../http2/test/hostile-helpers.js';
import { quic, type QuicOptions } from '../src/index.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function agent(options: QuicOptions = { port: 0 }): Promise<Agent> {
  const a = await createAgent({ channels: [quic(options)] });
  a.handle('echo', (body: unknown) => body);
  cleanups.push(() => a.close());
  return a;
}

/** The next refusal published for a QUIC listener that matches `filter` (agents publish on one process-wide channel). */
function nextRefusal(filter: (refusal: Refusal) => boolean): Promise<Refusal> {
  return new Promise((resolve) => {
    const listener = (message: unknown): void => {
      const refusal = message as Refusal;
      if (refusal.kind !== 'quic' || !filter(refusal)) return;
      diagnosticChannels.peerRefused.unsubscribe(listener);
      resolve(refusal);
    };
    diagnosticChannels.peerRefused.subscribe(listener);
  });
}

const portOf = (a: Agent): number => Number(new URL(a.addresses[0]!.split('@')[1]!).port);

describe('QUIC listener against hostile peers', () => {
  it('beyond maxConnections a new connection is refused before TLS, reported, and the peers it holds are still served', async () => {
    const server = await agent({ port: 0, limits: { maxConnections: 2 } });
    const [first, second, third] = await Promise.all([agent({}), agent({}), agent({})]);
    expect(await first!.send(server.addresses[0]!, 'echo', 1)).toBe(1);
    expect(await second!.send(server.addresses[0]!, 'echo', 2)).toBe(2);

    const reported = nextRefusal((r) => r.reason === 'max-connections');
    const error = await third!.send(server.addresses[0]!, 'echo', 3).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    // The agent reports an unreachable peer as UNAVAILABLE; the channel's own failure is its cause.
    expect((error as AgentError).code).toBe('UNAVAILABLE');
    expect(((error as AgentError).cause as AgentError).code).toBe('RESOURCE_EXHAUSTED');
    expect((error as AgentError).message).toContain('refused the connection');
    const refusal = await reported;
    expect(refusal).toMatchObject({ stage: 'connection', reason: 'max-connections', code: 'RESOURCE_EXHAUSTED' });
    expect(refusal.remoteAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(server.stats().refusals['connection:max-connections']).toBeGreaterThanOrEqual(1);

    expect(await first!.send(server.addresses[0]!, 'echo', 'still served')).toBe('still served');
    // A connection that goes gives its place back: the third peer gets in.
    const [held] = server.channels(first!.id);
    await first!.close();
    await held!.closed;
    expect(await third!.send(server.addresses[0]!, 'echo', 3)).toBe(3);
  });

  it('a full listener evicts the idle connection of the group holding the most for a smaller group, and says why', async () => {
    await expectIdleEviction({
      kind: 'quic',
      agent: (options) => agent((options ?? {}) as QuicOptions),
      // A listening agent dials from its own endpoint: bound to the address, its connections come from it.
      from: (ip) => ({ host: ip, port: 0 }),
      // The engine's clock is its own (Rust's Instant; its unit tests drive it): the idle age passes for real here.
      // Only the lower bound matters, and a timer never fires early.
      advance: (ms) => sleep(ms + 10),
      minIdleMs: MIN_IDLE_MS_BEFORE_EVICTION,
    });
  });

  it('a handshake that stalls after the first datagram is dropped at handshakeTimeoutMs and reported', async () => {
    const server = await agent({ port: 0, limits: { handshakeTimeoutMs: 200 } });
    // A black hole between a real client and the server: it passes the client's first datagram (its Initial)
    // on and nothing after, so the server's handshake can only end by its own deadline.
    const hole = createSocket('udp4');
    hole.bind(0, '127.0.0.1');
    await once(hole, 'listening');
    cleanups.push(() => new Promise<void>((resolve) => hole.close(() => resolve())));
    const holePort = hole.address().port;
    const client = await agent({ connectTimeoutMs: 300 });
    const reported = nextRefusal((r) => r.remoteAddress === `127.0.0.1:${holePort}`);
    const dialled = client.send(`${server.id}@quic://127.0.0.1:${holePort}`, 'echo', 1).catch((e: unknown) => e);
    const [initial] = (await once(hole, 'message')) as [Buffer];
    hole.send(initial, portOf(server), '127.0.0.1');

    const refusal = await reported;
    expect(refusal).toMatchObject({ stage: 'handshake', reason: 'handshake-timeout', kind: 'quic' });
    expect(refusal.detail).toContain('200 ms');
    expect(server.stats().refusals['handshake:handshake-timeout']).toBe(1);
    expect(((await dialled) as AgentError).code).toBe('UNAVAILABLE');
  });

  it('a failed handshake is reported with why: a dialler that rejects our key sends a TLS alert', async () => {
    const server = await agent();
    const client = await agent({});
    const reported = nextRefusal((r) => r.stage === 'handshake');
    const impostor = Identity.generate();
    const error = await client.send(`${impostor.id}@quic://127.0.0.1:${portOf(server)}`, 'echo', 1).catch((e: unknown) => e);
    expect((error as AgentError).code).toBe('UNAUTHENTICATED');
    const refusal = await reported;
    expect(refusal).toMatchObject({ stage: 'handshake', reason: 'tls-alert' });
    expect(refusal.detail).toMatch(/^peer sent TLS alert \d+/);
    expect(server.stats().refusals['handshake:tls-alert']).toBe(1);
  });

  it('listener limits are validated when the transport is made', () => {
    expect(() => quic({ port: 0, limits: { maxConnections: 0 } })).toThrow(/maxConnections/);
    expect(() => quic({ port: 0, limits: { handshakeTimeoutMs: 1.5 } })).toThrow(/handshakeTimeoutMs/);
  });
});

describe('QUIC close codes reach the other side', () => {
  for (const code of ['PERMISSION_DENIED', 'UNAUTHENTICATED', 'RESOURCE_EXHAUSTED'] as ErrorCode[]) {
    it(`a call in flight fails with ${code} when the server closes the channel with it`, async () => {
      const server = await agent();
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      server.handle('hang', () => {
        started();
        return new Promise(() => undefined);
      });
      const client = await agent({});
      const call = client.send(server.addresses[0]!, 'hang', null).catch((e: unknown) => e);
      await running;
      const [channel] = client.channels(server.id);
      await server.channels(client.id)[0]!.close(new AgentError(code, 'go away'));
      const error = await call;
      expect(error).toBeInstanceOf(AgentError);
      expect((error as AgentError).code).toBe(code);
      expect((await channel!.closed).code).toBe(code);
    });
  }

  it('a listener that closes every new channel with PERMISSION_DENIED (a connection gate) fails the dialler’s next call with it', async () => {
    const listening = quic({ port: 0 });
    const dialling = quic({});
    cleanups.push(() => listening.close?.(), () => dialling.close?.());
    const serverIdentity = Identity.generate();
    const clientIdentity = Identity.generate();
    const context = (identity: Identity) => ({ identity, tls: selfSignedCertificate(identity), onStream: () => undefined });
    const listener = await listening.listen({
      ...context(serverIdentity),
      onChannel: (channel: Channel) => void channel.close(new AgentError('PERMISSION_DENIED', 'not on the allow list')),
    });
    cleanups.push(() => listener.close());
    const channel = await dialling.dial(new URL(listener.addresses[0]!), {
      ...context(clientIdentity),
      expectedPeer: serverIdentity.id,
      signal: new AbortController().signal,
    });
    const attempt = (async () => {
      const stream = await channel.openStream();
      await stream.write(new Uint8Array([1]));
      return stream.read();
    })().catch((e: unknown) => e);
    expect(((await attempt) as AgentError).code).toBe('PERMISSION_DENIED');
    const reason = await channel.closed;
    expect(reason.code).toBe('PERMISSION_DENIED');
    expect(reason.message).toContain('not on the allow list');
  });
});
