import { createAgent, Identity, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { quic, QuicChannel } from '../src/index.js';
import { heldReplies, type HeldReplies } from './fixtures/held-replies.js';

// 0-RTT to known peers over real loopback QUIC. What travelled early is shown by events, never by timings: the
// listener's replies are held by a relay, so the caller's handshake cannot end, and a call the listener serves
// meanwhile was sent in 0-RTT; the channel's counters (streams opened before the handshake ended, how the peer
// answered our early data) say the same from the caller's side.

const agents: Agent[] = [];
const relays: HeldReplies[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  for (const relay of relays.splice(0)) relay.close();
});

/** A listener answering `echo`; `served` records each body as its handler runs. */
async function server(identity?: Identity): Promise<Agent & { served: unknown[]; onServed: (body: unknown) => void }> {
  const a = Object.assign(await createAgent({ identity, channels: [quic({ port: 0 })] }), { served: [] as unknown[], onServed: (_body: unknown): void => undefined });
  a.handle('echo', (body: unknown) => {
    a.served.push(body);
    a.onServed(body);
    return body;
  });
  agents.push(a);
  return a;
}

/** `peer`'s address through a relay that can hold its replies. */
async function viaRelay(peer: Agent): Promise<{ address: string; relay: HeldReplies }> {
  const port = Number(new URL(peer.addresses[0]!.slice(peer.addresses[0]!.indexOf('@') + 1)).port);
  const relay = await heldReplies(port);
  relays.push(relay);
  return { address: `${peer.id}@quic://127.0.0.1:${relay.port}`, relay };
}

function served(peer: { onServed: (body: unknown) => void }, body: unknown): Promise<void> {
  return new Promise((resolve) => {
    peer.onServed = (got) => {
      if (got === body) resolve();
    };
  });
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
  // (Its tickets arrive with the listener's handshake flight, before the answer to this first call.)
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
    const { address, relay } = await viaRelay(peer);

    const restarted = await caller(identity);
    relay.hold(); // the caller never hears the listener: its handshake cannot end
    const reachedPeer = served(peer, 'again');
    const answer = restarted.send(address, 'echo', 'again', { idempotent: true });
    await reachedPeer; // served before the caller's handshake could end: the request was 0-RTT data
    const channel = quicChannel(restarted, peer.id);
    expect(channel.earlyData).toBe('pending');
    expect(channel.earlyStreams).toBe(1);
    relay.release();
    expect(await answer).toBe('again');
    expect(await channel.handshakeEnded()).toBe(true);
    expect(channel.earlyData).toBe('accepted');
    // The peer knew the caller from its ticket and took the connection before the handshake ended.
    expect(quicChannel(peer, restarted.id).earlyData).not.toBe('none');
  });

  it("a ticket from peer A is never offered to peer B: B's first connection is a full handshake", async () => {
    const [a, b] = [await server(), await server()];
    const identity = Identity.generate();
    await knownPeer(identity, a);

    const restarted = await caller(identity);
    expect(await restarted.send(b.addresses[0]!, 'echo', 'to b', { idempotent: true })).toBe('to b');
    const toB = quicChannel(restarted, b.id);
    expect(toB.earlyData).toBe('none'); // no ticket was offered: the dial waited for a full handshake
    expect(toB.earlyStreams).toBe(0);
    expect(quicChannel(b, restarted.id).earlyData).toBe('none');
    // A's tickets are still there, for A alone.
    expect(await restarted.send(a.addresses[0]!, 'echo', 'to a', { idempotent: true })).toBe('to a');
    expect(quicChannel(restarted, a.id).earlyData).not.toBe('none');
  });

  it('a call not marked idempotent never rides 0-RTT: it waits for the handshake', async () => {
    const peer = await server();
    const identity = Identity.generate();
    await knownPeer(identity, peer);
    const { address, relay } = await viaRelay(peer);

    const restarted = await caller(identity);
    relay.hold();
    const replaySafeServed = served(peer, 'replay-safe');
    const plain = restarted.send(address, 'echo', 'plain');
    const replaySafe = restarted.send(address, 'echo', 'replay-safe', { idempotent: true });
    await replaySafeServed;
    expect(peer.served).toEqual(['hello', 'replay-safe']); // the plain call waits behind the handshake
    const channel = quicChannel(restarted, peer.id);
    expect(channel.earlyStreams).toBe(1);
    relay.release();
    expect(await Promise.all([plain, replaySafe])).toEqual(['plain', 'replay-safe']);
    expect(restarted.channels(peer.id)).toHaveLength(1);
    expect(channel.earlyStreams).toBe(1);
    expect(peer.served).toEqual(['hello', 'replay-safe', 'plain']);
  });

  it('a known peer that restarted (its tickets gone) rejects the early data: the call is resent after the handshake, once', async () => {
    const identity = Identity.generate();
    const peerIdentity = Identity.generate();
    const before = await server(peerIdentity);
    await knownPeer(identity, before);
    const { address, relay } = await viaRelay(before);
    await before.close();
    const after = await server(peerIdentity); // same key, fresh process state: no tickets
    relay.retarget(Number(after.addresses[0]!.split(':').pop()));

    const restarted = await caller(identity);
    relay.hold(); // the caller's handshake cannot end before its call's stream left in 0-RTT
    const answer = restarted.send(address, 'echo', 'again', { idempotent: true });
    await relay.zeroRttSent();
    relay.release();
    expect(await answer).toBe('again');
    const channel = quicChannel(restarted, after.id);
    expect(channel.earlyStreams).toBe(1);
    expect(channel.earlyData).toBe('rejected');
    expect(after.served).toEqual(['again']); // the 0-RTT copy was discarded unread; the resend ran once
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
