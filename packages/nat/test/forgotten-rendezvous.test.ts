import { randomBytes } from 'node:crypto';
import { agentIdFromPublicKey, createAgent, type Agent } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { afterEach, describe, expect, it } from 'vitest';
import { RendezvousClient, signRecord } from '../src/index.js';

/** Peers core's address book keeps (MAX_KNOWN_PEERS, not exported from core): the one learned or dialled longest ago goes first. */
const MAX_KNOWN_PEERS = 16_384;

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

describe("a rendezvous the agent's address book forgot", () => {
  // The client gave core each rendezvous address once, when it learned it. A control channel that stays up never
  // dials, so the rendezvous became the peer used longest ago: after 16,384 other peers (an app calling peers by
  // address, an app's addPeer), core forgot it, and once the channel dropped the agent could reach its rendezvous
  // no more ("no address known"), for good.
  it('is dialled again when the control channel drops: the client gives its address with every call', async () => {
    const rendezvous = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const agent = await createAgent({ channels: [webSocket()] });
    agents.push(agent, rendezvous);
    let registrations = 0;
    rendezvous.handle('rdv.register', () => ({ ok: ++registrations }));
    const client = new RendezvousClient(agent, [rendezvous.addresses[0]!]);
    const record = () => signRecord(agent.identity, { agentId: agent.id, candidates: [], nat: 'none', portDelta: 0, seq: registrations + 1, expiresAt: Date.now() + 30_000 });
    await client.publish(record());

    for (let n = 0; n < MAX_KNOWN_PEERS; n++) agent.addPeer(`${agentIdFromPublicKey(randomBytes(32))}@wss://127.0.0.1:9/agentlink`);
    await Promise.all(agent.channels(rendezvous.id).map((channel) => channel.close()));
    await client.publish(record());
    expect(registrations).toBe(2);
  });
});

describe('instances a rendezvous lists', () => {
  // Each rdv.info renews the instances the client keeps: those no longer listed are forgotten, new ones learned.
  // Each learned one was given to core's address book at once, called or not: a rendezvous naming fresh instances
  // at every heartbeat (15 every 15 s) pushed the app's own peers out of the book (16,384 places) within hours,
  // and a call by AgentId to a peer the app had given by address failed "no address known".
  it("do not push the app's peers out of core's address book unless the agent calls them", async () => {
    const rendezvous = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const friend = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    const agent = await createAgent({ channels: [webSocket()] });
    agents.push(agent, friend, rendezvous);
    friend.handle('echo', (n: number) => n);
    agent.addPeer(friend.addresses[0]!); // the app's: called later by its AgentId
    let listed: string[] = [];
    rendezvous.handle('rdv.info', () => ({ stun: [], instances: [rendezvous.addresses[0]!, ...listed] }));
    rendezvous.handle('rdv.register', () => ({ ok: true }));
    const client = new RendezvousClient(agent, [rendezvous.addresses[0]!]);
    const signed = await signRecord(agent.identity, { agentId: agent.id, candidates: [], nat: 'none', portDelta: 0, seq: 1, expiresAt: Date.now() + 30_000 });
    for (let round = 0; round * 15 <= MAX_KNOWN_PEERS; round++) {
      listed = Array.from({ length: 15 }, () => `${agentIdFromPublicKey(randomBytes(32))}@wss://127.0.0.1:9/agentlink`);
      await client.publishWith(async () => signed);
    }
    expect(client.knownIds).toHaveLength(16); // the latest list is kept, as before
    expect(await agent.send(friend.id, 'echo', 7)).toBe(7);
  }, 60_000);
});
