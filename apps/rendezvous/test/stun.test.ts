import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { PerIpRate } from '../src/ip-limits.js';
import type { StunOutcome } from '../src/stun-answer.js';
import { startStunServer, type StunServer } from '../src/stun-server.js';
import { cleanup, rendezvous } from './helpers.js';
import {
  ALLOCATE_REQUEST,
  BINDING_ERROR,
  BINDING_INDICATION,
  BINDING_REQUEST,
  BINDING_SUCCESS,
  attributesOf,
  fingerprintValid,
  stunMessage,
  udpClient,
  xorMappedAddress,
} from './stun-wire.js';

afterEach(cleanup);

const servers: StunServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** A STUN server on loopback whose outcomes the test can wait for, one event per datagram. */
async function stunServer(ratePerSecond = 1000): Promise<{ port: number; outcomes: StunOutcome[]; handled(n: number): Promise<void> }> {
  const outcomes: StunOutcome[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const server = await startStunServer({
    host: '127.0.0.1',
    port: 0,
    rate: new PerIpRate(ratePerSecond),
    onDatagram: (outcome) => {
      outcomes.push(outcome);
      for (const w of waiters.filter((w) => outcomes.length >= w.n)) w.resolve();
    },
  });
  servers.push(server);
  return {
    port: server.port,
    outcomes,
    handled: (n) => (outcomes.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve }))),
  };
}

describe('rendezvous STUN server', () => {
  it('answers a Binding request with the mapped address and a FINGERPRINT, at most 2x the request (IPv4)', async () => {
    const server = await stunServer();
    const client = await udpClient();
    const transaction = randomBytes(12);
    const request = stunMessage(BINDING_REQUEST, [], { transaction });
    await client.send(request, server.port);
    const answer = await client.next();
    expect(answer.readUInt16BE(0)).toBe(BINDING_SUCCESS);
    expect(answer.subarray(8, 20)).toEqual(transaction);
    expect(xorMappedAddress(answer)).toEqual({ address: '127.0.0.1', port: client.port });
    expect(fingerprintValid(answer)).toBe(true);
    // XOR-MAPPED-ADDRESS and FINGERPRINT only (no SOFTWARE): 40 bytes for a 20-byte request.
    expect(attributesOf(answer).map((a) => a.type)).toEqual([0x0020, 0x8028]);
    expect(request.length).toBe(20);
    expect(answer.length).toBe(40);
    client.socket.close();
  });

  it('drops other methods, indications and responses silently (RFC 5389 §7.3), and answers Binding after them', async () => {
    const server = await stunServer();
    const client = await udpClient();
    for (const type of [ALLOCATE_REQUEST, BINDING_INDICATION, BINDING_SUCCESS, BINDING_ERROR]) await client.send(stunMessage(type), server.port);
    await client.send(Buffer.from('not stun at all, just bytes'), server.port);
    await client.send(stunMessage(BINDING_REQUEST), server.port);
    const first = await client.next();
    // The first (and only) datagram back is the Binding answer: nothing was sent for the five before it.
    expect(first.readUInt16BE(0)).toBe(BINDING_SUCCESS);
    await server.handled(6);
    expect(server.outcomes).toEqual(['not-binding-request', 'not-binding-request', 'not-binding-request', 'not-binding-request', 'malformed', 'answered']);
    expect(client.received).toHaveLength(1);
    client.socket.close();
  });

  it('answers 420 with UNKNOWN-ATTRIBUTES for unknown comprehension-required attributes, ignores unknown optional ones', async () => {
    const server = await stunServer();
    const client = await udpClient();
    const request = stunMessage(BINDING_REQUEST, [{ type: 0x7fff }, { type: 0x8fff, value: Buffer.from('optional') }, { type: 0x0003, value: Buffer.alloc(4) }]);
    await client.send(request, server.port);
    const error = await client.next();
    expect(error.readUInt16BE(0)).toBe(BINDING_ERROR);
    const attributes = attributesOf(error);
    const code = attributes.find((a) => a.type === 0x0009)!.value!;
    expect(code[2]! * 100 + code[3]!).toBe(420);
    const unknown = attributes.find((a) => a.type === 0x000a)!.value!;
    expect([unknown.readUInt16BE(0), unknown.readUInt16BE(2)]).toEqual([0x7fff, 0x0003]);
    expect(fingerprintValid(error)).toBe(true);

    // The smallest request that earns a 420 (one empty unknown attribute, 24 bytes) gets 64 bytes: 2.67x.
    await client.send(stunMessage(BINDING_REQUEST, [{ type: 0x7001 }]), server.port);
    expect((await client.next()).length).toBe(64);

    await client.send(stunMessage(BINDING_REQUEST, [{ type: 0x8fff, value: Buffer.from('optional') }]), server.port);
    expect((await client.next()).readUInt16BE(0)).toBe(BINDING_SUCCESS);
    expect(server.outcomes).toEqual(['unknown-attribute', 'unknown-attribute', 'answered']);
    client.socket.close();
  });

  it('checks FINGERPRINT when present: a good one is answered, a wrong or misplaced one is dropped', async () => {
    const server = await stunServer();
    const client = await udpClient();
    const wrong = stunMessage(BINDING_REQUEST, [], { fingerprint: 'bad' });
    const good = stunMessage(BINDING_REQUEST, [{ type: 0x8fff, value: Buffer.from('unknown optional, covered by the CRC') }], { fingerprint: 'good' });
    // FINGERPRINT followed by another attribute: a valid CRC in the wrong place.
    const fingerprinted = stunMessage(BINDING_REQUEST, [], { fingerprint: 'good' });
    const misplaced = Buffer.concat([fingerprinted, Buffer.from([0x80, 0x22, 0, 0])]);
    misplaced.writeUInt16BE(misplaced.length - 20, 2);
    await client.send(wrong, server.port);
    await client.send(misplaced, server.port);
    await client.send(good, server.port);
    const answer = await client.next();
    expect(answer.subarray(8, 20)).toEqual(good.subarray(8, 20));
    expect(fingerprintValid(answer)).toBe(true);
    await server.handled(3);
    expect(server.outcomes).toEqual(['bad-fingerprint', 'bad-fingerprint', 'answered']);
    client.socket.close();
  });

  it('drops requests larger than 1,280 bytes and malformed headers', async () => {
    const server = await stunServer();
    const client = await udpClient();
    await client.send(stunMessage(BINDING_REQUEST, [{ type: 0x8fff, value: Buffer.alloc(1300) }]), server.port);
    const badLength = stunMessage(BINDING_REQUEST);
    badLength.writeUInt16BE(8, 2); // says 8 bytes of attributes, has none
    await client.send(badLength, server.port);
    const noCookie = stunMessage(BINDING_REQUEST);
    noCookie.writeUInt32BE(0, 4); // RFC 3489 style: no XOR-MAPPED-ADDRESS is possible
    await client.send(noCookie, server.port);
    await client.send(stunMessage(BINDING_REQUEST), server.port);
    expect((await client.next()).readUInt16BE(0)).toBe(BINDING_SUCCESS);
    await server.handled(4);
    expect(server.outcomes).toEqual(['too-large', 'malformed', 'malformed', 'answered']);
    client.socket.close();
  });

  it('answers one IP no faster than its rate (burst 2x), across both STUN ports of a rendezvous, and counts the rest', async () => {
    const r = await rendezvous({ stunRequestsPerSecondPerIp: 5 });
    const client = await udpClient();
    const sent = 60;
    const started = performance.now();
    for (let i = 0; i < sent; i++) await client.send(stunMessage(BINDING_REQUEST), r.stunPorts[i % 2]!);
    // Wait for the server to have seen all of them: answered and refused add up to what was sent.
    while (r.metrics.stunCount('answered') + r.metrics.stunCount('rate') < sent) await new Promise((resolve) => setImmediate(resolve));
    const elapsedSeconds = (performance.now() - started) / 1000;
    const answered = r.metrics.stunCount('answered');
    // A full bucket of 10, plus 5 a second for however long the sending took.
    expect(answered).toBeGreaterThanOrEqual(10);
    expect(answered).toBeLessThanOrEqual(10 + Math.ceil(elapsedSeconds * 5));
    expect(r.metrics.stunCount('rate')).toBe(sent - answered);
    const metrics = await (await fetch(`http://127.0.0.1:${r.httpPort}/metrics`)).text();
    expect(metrics).toContain(`rendezvous_stun_datagrams_total{outcome="rate"} ${sent - answered}`);
    expect(metrics).toContain(`rendezvous_stun_bytes_total{direction="sent"} ${answered * 40}`);
    client.socket.close();
  });
});
