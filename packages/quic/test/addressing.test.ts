import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import {
  AgentError,
  createAgent,
  Identity,
  type Agent,
} from '@agentlink/core';
import {
  selfSignedCertificate,
  type Channel,
  type ChannelStream,
  type DialContext,
  type ListenContext,
} from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { loadNative, quic } from '../src/index.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function agent(options: Parameters<typeof quic>[0]): Promise<Agent> {
  const a = await createAgent({ channels: [quic(options)] });
  a.handle('echo', (body: unknown) => body);
  cleanups.push(() => a.close());
  return a;
}

/** What a transport needs from an agent, for driving `quic()` directly. */
function transportContext(identity = Identity.generate()): Omit<ListenContext, 'onChannel'> {
  return { identity, tls: selfSignedCertificate(identity), onStream: (stream: ChannelStream) => stream.reset(new AgentError('CANCELLED', 'unused')) };
}

function liveConnections(): number {
  const native = loadNative();
  if (!native.ok) throw new Error(native.reason);
  return native.binding.liveObjects().connections;
}

describe('QUIC addressing', () => {
  it('dials an IPv6 literal: quic://[::1]:port, listening on ::1', async () => {
    const server = await agent({ port: 0, host: '::1' });
    expect(server.addresses[0]).toMatch(/@quic:\/\/\[::1\]:\d+$/);
    const client = await agent({});
    expect(await client.send(server.addresses[0]!, 'echo', 'over IPv6')).toBe('over IPv6');
    expect(server.channels()[0]!.remoteAddress).toMatch(/^\[::1\]:\d+$/);
  });

  it('a listener on :: is dual-stack: reachable at 127.0.0.1 and [::1], and an IPv4 peer shows as IPv4', async () => {
    const server = await agent({ port: 0, host: '::' });
    const port = new URL(server.addresses[0]!.split('@')[1]!).port;
    const [v4, v6] = await Promise.all([agent({}), agent({})]);
    expect(await v4.send(`${server.id}@quic://127.0.0.1:${port}`, 'echo', 4)).toBe(4);
    expect(await v6.send(`${server.id}@quic://[::1]:${port}`, 'echo', 6)).toBe(6);
    const remotes = server.channels().map((c) => c.remoteAddress).sort();
    expect(remotes).toHaveLength(2);
    expect(remotes[0]).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(remotes[1]).toMatch(/^\[::1\]:\d+$/);
  });

  it('dials a name, resolved without blocking the engine (localhost)', async () => {
    const server = await agent({ port: 0, host: '127.0.0.1' });
    const port = new URL(server.addresses[0]!.split('@')[1]!).port;
    const client = await agent({});
    expect(await client.send(`${server.id}@quic://localhost:${port}`, 'echo', 'by name')).toBe('by name');
  });

  it('an IPv4-only endpoint says why it cannot reach an IPv6 address', async () => {
    const server = await agent({ port: 0, host: '::1' });
    const client = await agent({ port: 0, host: '127.0.0.1' }); // dials from its listening (IPv4) socket
    const error = await client.send(server.addresses[0]!, 'echo', 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('UNAVAILABLE');
    const cause = (error as AgentError).cause as AgentError;
    expect(cause.message).toMatch(/IPv4/);
  });
});

describe('QUIC dials that are abandoned', () => {
  it('a dial aborted mid-handshake rejects with the abort reason and leaves no connection in the engine', async () => {
    // A peer that never answers: the handshake can only end by the abort (or the 60 s connect timeout).
    const hole = createSocket('udp4');
    await new Promise<void>((resolve) => hole.bind(0, '127.0.0.1', resolve));
    cleanups.push(() => void hole.close());
    const transport = quic({ connectTimeoutMs: 60_000 });
    cleanups.push(() => transport.close!());
    const controller = new AbortController();
    const before = liveConnections();
    const firstDatagram = once(hole, 'message');
    const dialling = transport
      .dial(new URL(`quic://127.0.0.1:${hole.address().port}`), {
        ...transportContext(),
        expectedPeer: Identity.generate().id,
        signal: controller.signal,
      } satisfies DialContext)
      .catch((e: unknown) => e);
    await firstDatagram; // the handshake is under way
    controller.abort(new AgentError('CANCELLED', 'no longer needed'));
    const error = await dialling;
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).message).toBe('no longer needed');
    const endpoint = (await transport.endpoint())!;
    await endpoint.idle(); // every connection of the endpoint closed and drained
    expect(liveConnections()).toBe(before);
  });

  it('a dial aborted as its handshake completes is closed and released: the listener sees the channel close', async () => {
    const server = quic({ port: 0 });
    const serverIdentity = Identity.generate();
    const controller = new AbortController();
    let surfaced!: (channel: Channel) => void;
    const accepted = new Promise<Channel>((resolve) => (surfaced = resolve));
    const listener = await server.listen({
      ...transportContext(serverIdentity),
      // The listener has the connection: the dialler's handshake is done or about to be. Abort it now.
      onChannel: (channel) => {
        surfaced(channel);
        controller.abort(new AgentError('CANCELLED', 'too late'));
      },
    });
    cleanups.push(() => listener.close(), () => server.close!());
    const client = quic({});
    cleanups.push(() => client.close!());
    const before = liveConnections();
    // Which comes first — the dialler's handshake reaching JavaScript, or the abort the listener triggers — is
    // a race; whichever wins, nothing may be left open. When the dial wins, the caller closes the channel,
    // possibly before the listener has surfaced its end: the client's Finished left before that close, so the
    // listener still completes its handshake and surfaces the channel, already closing.
    const outcome = await client
      .dial(new URL(listener.addresses[0]!), { ...transportContext(), expectedPeer: serverIdentity.id, signal: controller.signal })
      .catch((e: unknown) => e);
    if (outcome instanceof AgentError) expect(outcome.message).toBe('too late');
    else await (outcome as Channel).close(); // the dial won: the channel is the caller's to close
    const reason = await (await accepted).closed; // the dialler let it go
    expect(reason).toBeInstanceOf(AgentError);
    await (await client.endpoint())!.idle();
    await (await server.endpoint())!.idle();
    expect(liveConnections()).toBe(before); // both ends released
  });
});
