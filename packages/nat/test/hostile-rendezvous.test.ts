import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { AgentError, createAgent, type Agent } from '@agentlink/core';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import stun from '@msimerson/stun';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_STUN_SERVERS, reach, type Reach } from '../src/index.js';

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
});
