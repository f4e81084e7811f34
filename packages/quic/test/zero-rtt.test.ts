import { createAgent, Identity, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { quic, QuicChannel } from '../src/index.js';

// 0-RTT to known peers over real loopback QUIC. What travelled early is read from the channel's counters
// (streams opened before the handshake ended, and how the peer answered our early data), never from timings.

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function server(): Promise<Agent> {
  const a = await createAgent({ channels: [quic({ port: 0 })] });
  a.handle('echo', (body: unknown) => body);
  agents.push(a);
  return a;
}

async function caller(identity: Identity): Promise<Agent> {
  const a = await createAgent({ identity, channels: [quic({ zeroRtt: true })] });
  agents.push(a);
  return a;
}

function quicChannel(agent: Agent, peer: string): QuicChannel {
  const [channel] = agent.channels(peer);
  if (!(channel instanceof QuicChannel)) throw new Error(`no QUIC channel to ${peer}`);
  return channel;
}

/** A caller that talked to `peer` once (a full handshake: it now holds the peer's tickets), then closed. */
async function knownPeer(identity: Identity, peer: Agent): Promise<void> {
  const first = await caller(identity);
  expect(await first.send(peer.addresses[0]!, 'echo', 'hello')).toBe('hello');
  const channel = quicChannel(first, peer.id);
  expect(channel.earlyData).toBe('none');
  expect(channel.earlyStreams).toBe(0);
  await first.close();
}

describe('QUIC 0-RTT to known peers', () => {
  it('zeroRtt is validated: a boolean', () => {
    for (const wrong of ['yes', 1, null]) expect(() => quic({ zeroRtt: wrong as never })).toThrow(/zeroRtt must be a boolean/);
  });

  it('a restarted caller resumes with a known peer and its idempotent call travels in 0-RTT', async () => {
    const peer = await server();
    const identity = Identity.generate();
    await knownPeer(identity, peer);

    const restarted = await caller(identity);
    expect(await restarted.send(peer.addresses[0]!, 'echo', 'again', { idempotent: true })).toBe('again');
    const channel = quicChannel(restarted, peer.id);
    expect(channel.earlyStreams).toBe(1);
    expect(channel.earlyData).toBe('accepted');
    // The peer knew the caller from its ticket and took the connection before the handshake ended.
    expect(quicChannel(peer, restarted.id).earlyData).toBe('accepted');
  });

  it("a ticket from peer A is never offered to peer B: B's first connection is a full handshake", async () => {
    const [a, b] = [await server(), await server()];
    const identity = Identity.generate();
    await knownPeer(identity, a);

    const restarted = await caller(identity);
    expect(await restarted.send(b.addresses[0]!, 'echo', 'to b', { idempotent: true })).toBe('to b');
    const toB = quicChannel(restarted, b.id);
    expect(toB.earlyData).toBe('none');
    expect(toB.earlyStreams).toBe(0);
    expect(quicChannel(b, restarted.id).earlyData).toBe('none');
    // A's tickets are still there, for A alone.
    expect(await restarted.send(a.addresses[0]!, 'echo', 'to a', { idempotent: true })).toBe('to a');
    expect(quicChannel(restarted, a.id).earlyStreams).toBe(1);
  });

  it('a call not marked idempotent never rides 0-RTT: it waits for the handshake', async () => {
    const peer = await server();
    const identity = Identity.generate();
    await knownPeer(identity, peer);

    const restarted = await caller(identity);
    const [plain, replaySafe] = await Promise.all([
      restarted.send(peer.addresses[0]!, 'echo', 'plain'),
      restarted.send(peer.addresses[0]!, 'echo', 'replay-safe', { idempotent: true }),
    ]);
    expect([plain, replaySafe]).toEqual(['plain', 'replay-safe']);
    const channel = quicChannel(restarted, peer.id);
    expect(restarted.channels(peer.id)).toHaveLength(1);
    expect(channel.earlyStreams).toBe(1); // the idempotent one only
    expect(await restarted.send(peer.addresses[0]!, 'echo', 'later')).toBe('later');
    expect(channel.earlyStreams).toBe(1);
  });

  it('without zeroRtt a dial to a known peer waits for the handshake, as before', async () => {
    const peer = await server();
    const identity = Identity.generate();
    await knownPeer(identity, peer);
    const plain = await createAgent({ identity, channels: [quic()] });
    agents.push(plain);
    expect(await plain.send(peer.addresses[0]!, 'echo', 'x', { idempotent: true })).toBe('x');
    expect(quicChannel(plain, peer.id).earlyData).toBe('none');
    expect(quicChannel(plain, peer.id).earlyStreams).toBe(0);
  });
});
