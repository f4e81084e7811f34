import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { AgentError, createAgent, Identity, type Agent, type AgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import stun from '@msimerson/stun';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_LEARNED_PER_LOOKUP, MAX_STUN_SERVERS, reach, RendezvousClient, secureTunnel, signRecord, type Reach } from '../src/index.js';
import { MAX_ACCEPTED_RELAYS, MAX_RELAY_HANDSHAKES } from '../src/relay-admission.js';

const { STUN_BINDING_RESPONSE } = stun.constants;

/** A UDP socket on loopback that counts what arrives and answers every STUN binding request (as a STUN server). */
async function countingStunServer(): Promise<{ socket: Socket; port: number; requests: () => number }> {
  const socket = createSocket('udp4');
  let requests = 0;
  socket.on('message', (data, from) => {
    requests++;
    try {
      const request = stun.decode(data);
      const answer = stun.createMessage(STUN_BINDING_RESPONSE, request.transactionId);
      answer.addXorAddress(from.address, from.port);
      socket.send(answer.toBuffer(), from.port, from.address);
    } catch {
      // not STUN: counted only
    }
  });
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  return { socket, port: socket.address().port, requests: () => requests };
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A rendezvous that answers `rdv.info` with `info` and takes every registration. */
async function hostileRendezvous(info: unknown): Promise<{ agent: Agent; address: string; registered: Promise<unknown> }> {
  const agent = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
  cleanups.push(() => agent.close());
  let registered!: (record: unknown) => void;
  const registration = new Promise((resolve) => (registered = resolve));
  agent.handle('rdv.info', () => info);
  agent.handle('rdv.register', (record) => {
    registered(record);
    return { ok: true };
  });
  return { agent, address: agent.addresses[0]!, registered: registration };
}

/** An agent using `rendezvous` for NAT traversal: it registers as it starts (and fails to start if it cannot). */
async function reachingAgent(rendezvous: string): Promise<{ agent: Agent; nat: Reach }> {
  const q = quic({ port: 0, host: '127.0.0.1' });
  const nat = reach({ rendezvous, quic: q, heartbeatMs: 60_000 });
  const agent = await createAgent({ channels: [q, webSocket()], plugins: [nat] });
  cleanups.push(() => agent.close());
  return { agent, nat };
}

describe('an agent against a hostile rendezvous', () => {
  it('asks at most MAX_STUN_SERVERS of the STUN servers rdv.info lists (it cannot be made to send to thousands)', async () => {
    const victim = await countingStunServer();
    cleanups.push(() => victim.socket.close());
    // A thousand "STUN servers", all a third party's address (or a thousand third parties).
    const listed = Array.from({ length: 1000 }, () => ({ host: '127.0.0.1', port: victim.port }));
    const rendezvous = await hostileRendezvous({ stun: listed });
    await reachingAgent(rendezvous.address);
    await rendezvous.registered; // the NAT was classified: every binding it asked was answered
    // Before: one binding request to each of the 1,000 (each answered, so none retransmitted).
    expect(victim.requests()).toBeGreaterThan(0);
    expect(victim.requests()).toBeLessThanOrEqual(MAX_STUN_SERVERS);
  });

  it('refuses an rdv.info answer of the wrong shape with a typed error, not a TypeError', async () => {
    for (const info of [{ stun: 'not a list' }, { stun: [{ port: 'x' }] }, { stun: [{ host: 7, port: 3478 }] }, { stun: [], instances: 'wss://x' }, 42]) {
      const rendezvous = await hostileRendezvous(info);
      const failure = await reachingAgent(rendezvous.address).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(AgentError);
      expect((failure as AgentError).code).toBe('PROTOCOL_ERROR');
    }
  });

  it('an honest cluster of more instances than are read: the agent registers, keeping the first ones listed', async () => {
    // apps/rendezvous lists every live instance of its cluster in rdv.info.
    const instances = Array.from({ length: 100 }, (_, n) => `${Identity.generate().id}@wss://127.0.0.1:${1000 + n}/agentlink`);
    const rendezvous = await hostileRendezvous({ stun: [], instances });
    // Before: a list of over 64 was a PROTOCOL_ERROR, so no agent of a large cluster could register.
    const { nat } = await reachingAgent(rendezvous.address);
    expect(await rendezvous.registered).toBeDefined();
    expect(nat.registeredWith).toBe(rendezvous.agent.id);
  });

  it("renews the instances it keeps from each rdv.info naming the instance answering, and forgets nothing on a list that does not", async () => {
    const rendezvous = await hostileRendezvous({ stun: [] });
    const [gone, other] = [Identity.generate().id, Identity.generate().id];
    const { agent } = await reachingAgent(rendezvous.address);
    const client = new RendezvousClient(agent, [rendezvous.address]);
    let seq = 0;
    const registerWhileListing = async (instances: string[]): Promise<void> => {
      rendezvous.agent.handle('rdv.info', () => ({ stun: [], instances }));
      await client.publishWith(async () => signRecord(agent.identity, { agentId: agent.id, candidates: [], nat: 'none', portDelta: 0, seq: ++seq, expiresAt: Date.now() + 30_000 }));
    };
    await registerWhileListing([rendezvous.address, `${gone}@wss://127.0.0.1:9/agentlink`]);
    expect(client.knownIds).toEqual([rendezvous.agent.id, gone]);
    // Not naming itself (its cluster's announcements are missing, e.g. Redis restarted empty): new ones are learned,
    // none forgotten.
    await registerWhileListing([`${other}@wss://127.0.0.1:10/agentlink`]);
    expect(client.knownIds).toEqual([rendezvous.agent.id, gone, other]);
    // The whole cluster again, without `gone`: it stopped, and is forgotten (it may no longer send commands).
    await registerWhileListing([rendezvous.address, `${other}@wss://127.0.0.1:10/agentlink`]);
    expect(client.knownIds).toEqual([rendezvous.agent.id, other]);
    expect(client.isRendezvous(gone)).toBe(false);
  });

  it('an rdv.route answer that makes room is kept as a learned instance: renewed, forgotten when no longer listed', async () => {
    const rendezvous = await hostileRendezvous({ stun: [] });
    const { agent } = await reachingAgent(rendezvous.address);
    const client = new RendezvousClient(agent, [rendezvous.address]);
    const nowhere = (id: string) => `${id}@wss://127.0.0.1:9/agentlink`;
    const listed = Array.from({ length: 15 }, () => Identity.generate().id);
    rendezvous.agent.handle('rdv.info', () => ({ stun: [], instances: [rendezvous.address, ...listed.map(nowhere)] }));
    const sign = async () => signRecord(agent.identity, { agentId: agent.id, candidates: [], nat: 'none', portDelta: 0, seq: Date.now(), expiresAt: Date.now() + 30_000 });
    await client.publishWith(sign);
    expect(client.knownIds).toHaveLength(16); // full
    const routed = Identity.generate().id;
    rendezvous.agent.handle('rdv.route', () => ({ address: nowhere(routed) }));
    await expect(client.openRelay(Identity.generate().id, new AbortController().signal)).rejects.toBeInstanceOf(AgentError); // nobody there
    // Before: it took the oldest learned one's place but was not counted as learned: never renewed nor forgotten
    // (a command from it was taken for good), and each such answer left one place fewer to learn instances in.
    expect(client.knownIds).toEqual([rendezvous.agent.id, ...listed.slice(1), routed]);
    await client.publishWith(sign); // the cluster, as listed, does not name it: it is forgotten
    expect(client.isRendezvous(routed)).toBe(false);
    expect(client.knownIds).toHaveLength(16);
  });

  it("answers rdv.punch with another agent's record: the agent dials nobody, not that other agent", async () => {
    // B: a real agent on QUIC, with a record it signed. A: the agent the victim asks for, whose record names a
    // port where nobody answers (a punch is the only way there).
    const bQuic = quic({ port: 0, host: '127.0.0.1' });
    const b = await createAgent({ channels: [bQuic] });
    cleanups.push(() => b.close());
    b.handle('who', () => 'B');
    const bPort = (await bQuic.endpoint())!.localPort;
    const silent = createSocket('udp4');
    silent.bind(0, '127.0.0.1');
    await once(silent, 'listening');
    cleanups.push(() => silent.close());
    const recordOf = (identity: Identity, candidate: string) =>
      signRecord(identity, { agentId: identity.id, candidates: [candidate], nat: 'cone', portDelta: 0, seq: 1, expiresAt: Date.now() + 60_000 });
    const a = Identity.generate();
    const aRecord = recordOf(a, `quic://127.0.0.1:${silent.address().port}`);
    const bRecord = recordOf(b.identity, `quic://127.0.0.1:${bPort}`);
    const rendezvous = await hostileRendezvous({ stun: [] });
    rendezvous.agent.handle('rdv.lookup', () => aRecord);
    let punches = 0;
    rendezvous.agent.handle('rdv.punch', () => {
      punches++;
      return bRecord; // not the record of the agent asked for
    });
    const vQuic = quic({ port: 0, host: '127.0.0.1' });
    const nat = reach({ rendezvous: rendezvous.address, quic: vQuic, paths: ['punch'], heartbeatMs: 60_000, punchTimeoutMs: 1000 });
    const victim = await createAgent({ channels: [vQuic, webSocket()], plugins: [nat] });
    cleanups.push(() => victim.close());
    const outcome = await victim.send(a.id, 'who', undefined, { timeoutMs: 3000 }).then(
      (reply) => reply,
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(AgentError);
    // Before: the victim dialled B (pinning B's key) and got a channel to it, which the pool filed under B; A's
    // call still had none, so the pool dialled again: a punch and a new connection to B each time.
    expect(b.channels()).toEqual([]);
    expect(punches).toBe(1);
  });

  it('opens relays nobody asked for: their handshakes run a few at a time, at most MAX_ACCEPTED_RELAYS are held, more are refused', async () => {
    const rendezvous = await hostileRendezvous({ stun: [] });
    const { agent: victim, nat } = await reachingAgent(rendezvous.address);
    const held = () => (nat as unknown as { relayPath: { admission: { accepted: number } } }).relayPath.admission.accepted;
    const open = (from: AgentId) => rendezvous.agent.openTunnel(victim.id, 'nat.relay', { from }, { timeoutMs: 5000 });
    // A relay from no AgentId is refused as it is asked (before: accepted, and a handshake started for it).
    await expect(rendezvous.agent.openTunnel(victim.id, 'nat.relay', { from: 5 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(rendezvous.agent.openTunnel(victim.id, 'nat.relay', null)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    // Tunnels whose caller never says hello: each is a TLS server handshake the victim runs and waits on.
    const stalled = await Promise.all(Array.from({ length: MAX_RELAY_HANDSHAKES }, () => open(Identity.generate().id)));
    // One more, from a caller that does its handshake: it waits for a turn.
    const caller = Identity.generate();
    const next = await open(caller.id);
    let secured = false;
    const handshake = secureTunnel(next.stream, { tls: selfSignedCertificate(caller), role: 'client', expectedPeer: victim.id }).then((tunnel) => {
      secured = true;
      return tunnel;
    });
    // Round trips on the same control channel, behind the ClientHello: the victim read it long before these answer.
    for (let i = 0; i < 5; i++) await rendezvous.agent.ping(victim.id);
    expect(secured).toBe(false); // before: every tunnel's handshake ran at once (up to the channel's 1,024 streams)
    stalled[0]!.stream.reset(new AgentError('CANCELLED', 'gone')); // one turn comes free...
    const tunnel = await handshake; // ...and the waiting handshake takes it
    expect(secured).toBe(true);
    // Places: the 3 stalled, the secured one, and as many more as fit; then a typed refusal (before: all accepted).
    const more = await Promise.all(Array.from({ length: MAX_ACCEPTED_RELAYS - MAX_RELAY_HANDSHAKES }, () => open(Identity.generate().id)));
    await expect(open(Identity.generate().id)).rejects.toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
    // A relayed channel that closes gives its place back.
    tunnel.stream.reset(new AgentError('CANCELLED', 'done'));
    await expect.poll(() => open(Identity.generate().id).then(() => true, () => false)).toBe(true);
    for (const t of [...stalled, ...more]) t.stream.reset(new AgentError('CANCELLED', 'done'));
  }, 20_000);

  it('fails a lookup after at most MAX_LEARNED_PER_LOOKUP of the instances it listed, and after none when the answer is NOT_FOUND', async () => {
    // Fifteen TLS ports of third parties, listed as instances of the rendezvous's "cluster" (each with a key).
    const reached = new Set<number>();
    const instances: string[] = [];
    for (let n = 0; n < 15; n++) {
      const thirdParty = createServer((socket) => {
        reached.add(n);
        socket.destroy();
      });
      thirdParty.listen(0, '127.0.0.1');
      await once(thirdParty, 'listening');
      cleanups.push(() => thirdParty.close());
      instances.push(`${Identity.generate().id}@wss://127.0.0.1:${(thirdParty.address() as { port: number }).port}/agentlink`);
    }
    const rendezvous = await hostileRendezvous({ stun: [], instances });
    let answer = new AgentError('UNAVAILABLE', 'try elsewhere');
    let lookups = 0;
    rendezvous.agent.handle('rdv.lookup', () => {
      lookups++;
      throw answer;
    });
    const { agent: victim } = await reachingAgent(rendezvous.address);
    const stranger = Identity.generate().id;
    await expect(victim.send(stranger, 'hello', undefined, { timeoutMs: 8000 })).rejects.toBeInstanceOf(AgentError);
    expect(lookups).toBe(1);
    // Before: the lookup went on to all 15 (each dialled three times: 45 TCP connections and TLS attempts).
    expect(reached.size).toBe(MAX_LEARNED_PER_LOOKUP);
    answer = new AgentError('NOT_FOUND', 'nobody by that name');
    await expect(victim.send(Identity.generate().id, 'hello', undefined, { timeoutMs: 8000 })).rejects.toBeInstanceOf(AgentError);
    expect(lookups).toBe(2);
    expect(reached.size).toBe(MAX_LEARNED_PER_LOOKUP); // a cluster's instances share one store: they would answer the same
  }, 20_000);

  it('answers rdv.route with something other than an address: the relay fails with PROTOCOL_ERROR, not a TypeError', async () => {
    const rendezvous = await hostileRendezvous({ stun: [] });
    const { agent } = await reachingAgent(rendezvous.address);
    const client = new RendezvousClient(agent, [rendezvous.address]);
    for (const answer of [null, 7, { address: 7 }, { address: 'x'.repeat(2000) }]) {
      rendezvous.agent.handle('rdv.route', () => answer);
      const failure = await client.openRelay(Identity.generate().id, new AbortController().signal).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(AgentError);
      expect((failure as AgentError).code).toBe('PROTOCOL_ERROR');
    }
  });
});
