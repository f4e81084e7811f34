import { Identity } from '@agentlink/core';
import { describe, expect, it } from 'vitest';
import { parseBindingResponse, punchTargets, signRecord, verifyRecord, type PeerRecord } from '../src/index.js';

const record = (overrides: Partial<PeerRecord>): PeerRecord => ({
  agentId: Identity.generate().id,
  candidates: ['quic://203.0.113.9:40000', 'quic://10.0.0.2:7000'],
  nat: 'symmetric',
  portDelta: 2,
  seq: 1,
  expiresAt: Date.now() + 10_000,
  ...overrides,
});

describe('port prediction', () => {
  it('adds the next ports of a sequential symmetric NAT, stepping by its observed delta', () => {
    expect(punchTargets(record({}), 3)).toEqual([
      'quic://203.0.113.9:40000',
      'quic://10.0.0.2:7000',
      'quic://203.0.113.9:40002',
      'quic://203.0.113.9:40004',
      'quic://203.0.113.9:40006',
    ]);
    expect(punchTargets(record({ portDelta: 0 }), 2).slice(2)).toEqual(['quic://203.0.113.9:40001', 'quic://203.0.113.9:40002']);
  });

  it('predicts nothing for cone NATs, and never beyond the port range', () => {
    expect(punchTargets(record({ nat: 'cone' }), 8)).toEqual(['quic://203.0.113.9:40000', 'quic://10.0.0.2:7000']);
    const high = punchTargets(record({ candidates: ['quic://203.0.113.9:65534'], portDelta: 1 }), 4);
    expect(high).toEqual(['quic://203.0.113.9:65534', 'quic://203.0.113.9:65535']);
  });
});

describe('records and STUN parsing', () => {
  it('a signed record verifies; one byte changed does not', () => {
    const identity = Identity.generate();
    const signed = signRecord(identity, record({ agentId: identity.id }));
    expect(verifyRecord(signed).agentId).toBe(identity.id);
    const bytes = Buffer.from(signed.record);
    bytes[bytes.length - 1]! ^= 1;
    expect(() => verifyRecord({ record: bytes, signature: signed.signature })).toThrow(/not signed|malformed|MessagePack/);
  });

  it('ignores datagrams that are not STUN binding responses', () => {
    expect(parseBindingResponse(Buffer.from('hello, not stun at all, twenty+ bytes'))).toBeUndefined();
    expect(parseBindingResponse(Buffer.alloc(3))).toBeUndefined();
  });
});

describe('STUN and candidates over IPv6', () => {
  it('a QUIC endpoint on ::1 learns its mapping from a STUN server on ::1', async () => {
    const { createAgent } = await import('@agentlink/core');
    const { quic } = await import('@agentlink/quic');
    const { StunClient, startStunServer } = await import('../src/index.js');
    const server = await startStunServer('::1', 0);
    const transport = quic({ port: 0, host: '::1' });
    const agent = await createAgent({ channels: [transport] });
    try {
      const endpoint = (await transport.endpoint())!;
      const mapped = await new StunClient(endpoint).binding({ host: '::1', port: server.port });
      expect(mapped).toEqual({ host: '::1', port: endpoint.localPort });
      // The bracketed form, as a URL's hostname gives it, reaches the same server.
      expect(await new StunClient(endpoint).binding({ host: '[::1]', port: server.port })).toEqual(mapped);
    } finally {
      server.close();
      await agent.close();
    }
  });

  it('port prediction keeps an IPv6 candidate in brackets', () => {
    const targets = punchTargets(record({ candidates: ['quic://[2001:db8::7]:40000'], portDelta: 1 }), 2);
    expect(targets).toEqual(['quic://[2001:db8::7]:40000', 'quic://[2001:db8::7]:40001', 'quic://[2001:db8::7]:40002']);
  });
});

describe('a misconfigured rendezvous address', () => {
  // The key check fails before any rendezvous handler runs, so an ordinary agent stands in for the rendezvous.
  it('a rendezvous proving another key fails createAgent with UNAUTHENTICATED saying which address to fix', async () => {
    const { AgentError, createAgent } = await import('@agentlink/core');
    const { quic } = await import('@agentlink/quic');
    const { webSocket } = await import('@agentlink/ws');
    const { reach } = await import('../src/index.js');
    const rendezvous = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
    try {
      const url = rendezvous.addresses[0]!.slice(rendezvous.id.length + 1);
      const stale = `${Identity.generate().id}@${url}`; // e.g. the AgentId of an earlier start without --key-file
      const q = quic({ port: 0, host: '127.0.0.1' });
      const failure = await createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous: stale, quic: q })] }).then(
        async (agent) => {
          await agent.close();
          return new Error('createAgent resolved');
        },
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(AgentError);
      expect(failure).toMatchObject({ code: 'UNAUTHENTICATED' });
      expect((failure as Error).message).toContain(`rendezvous "${stale}": peer key mismatch`);
      expect((failure as Error).message).toContain('Give reach({ rendezvous }) the address the rendezvous printed when it started');
    } finally {
      await rendezvous.close();
    }
  });
});
