import { X509Certificate } from 'node:crypto';
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AGENT_ID_LENGTH,
  AgentError,
  Identity,
  isAgentId,
  loadIdentity,
  loadOrCreateIdentity,
  parseAgentId,
  publicKeyFromAgentId,
  saveIdentity,
  verifySignature,
} from '../src/index.js';
import {
  agentIdOfCertificate,
  authenticatePeer,
  secureContextOf,
  selfSignedCertificate,
} from '../src/transport.js';

describe('AgentId', () => {
  it('is the 32-byte key as 52 lowercase base32 characters, round-tripping exactly', () => {
    for (let i = 0; i < 50; i++) {
      const identity = Identity.generate();
      expect(identity.id).toMatch(/^[a-z2-7]{52}$/);
      expect(identity.id).toHaveLength(AGENT_ID_LENGTH);
      expect(Buffer.from(publicKeyFromAgentId(identity.id))).toEqual(Buffer.from(identity.publicKeyRaw));
    }
  });

  it('is case-insensitive on input and canonical on output', () => {
    const { id } = Identity.generate();
    expect(parseAgentId(id.toUpperCase())).toBe(id);
    expect(isAgentId(id)).toBe(true);
    expect(isAgentId(id.toUpperCase())).toBe(false);
  });

  it('rejects wrong lengths, foreign characters and non-canonical padding with INVALID_ARGUMENT', () => {
    const { id } = Identity.generate();
    for (const bad of [id.slice(1), `${id}a`, `${id.slice(0, 51)}1`, `${id.slice(0, 51)}8`, '']) {
      expect(() => parseAgentId(bad)).toThrowError(AgentError);
    }
    // The last character holds 1 key bit and 4 zero bits: 'b' (00001) sets a padding bit.
    const last = id.slice(0, 51) + 'b';
    expect(() => parseAgentId(last)).toThrow(/canonical/);
  });

  it('signatures verify against the AgentId and fail for another agent or altered data', () => {
    const alice = Identity.generate();
    const bob = Identity.generate();
    const data = Buffer.from('register me');
    const signature = alice.sign(data);
    expect(verifySignature(alice.id, data, signature)).toBe(true);
    expect(verifySignature(bob.id, data, signature)).toBe(false);
    expect(verifySignature(alice.id, Buffer.from('register you'), signature)).toBe(false);
  });
});

describe('key file', () => {
  const dir = (): Promise<string> => mkdtemp(join(tmpdir(), 'agentlink-key-'));

  it('saves with mode 0600 and loads the same identity', async () => {
    const path = join(await dir(), 'nested', 'agent.key');
    const identity = Identity.generate();
    await saveIdentity(identity, path);
    const { stat } = await import('node:fs/promises');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await loadIdentity(path)).id).toBe(identity.id);
  });

  it('loadOrCreateIdentity creates once and then keeps the same key', async () => {
    const path = join(await dir(), 'agent.key');
    const first = await loadOrCreateIdentity(path);
    const second = await loadOrCreateIdentity(path);
    expect(second.id).toBe(first.id);
  });

  it('refuses to overwrite an existing key file', async () => {
    const path = join(await dir(), 'agent.key');
    await saveIdentity(Identity.generate(), path);
    await expect(saveIdentity(Identity.generate(), path)).rejects.toMatchObject({ code: 'INVALID_KEY_FILE' });
  });

  it('refuses a key file readable by other users, naming the fix', async () => {
    const path = join(await dir(), 'agent.key');
    await saveIdentity(Identity.generate(), path);
    await chmod(path, 0o644);
    await expect(loadIdentity(path)).rejects.toMatchObject({ code: 'INVALID_KEY_FILE', message: expect.stringContaining('chmod 600') });
  });

  it('refuses missing and malformed files with INVALID_KEY_FILE', async () => {
    const d = await dir();
    await expect(loadIdentity(join(d, 'missing.key'))).rejects.toMatchObject({ code: 'INVALID_KEY_FILE' });
    const garbage = join(d, 'garbage.key');
    await writeFile(garbage, 'not a key', { mode: 0o600 });
    await expect(loadIdentity(garbage)).rejects.toMatchObject({ code: 'INVALID_KEY_FILE' });
    const rsa = join(d, 'rsa.key');
    const { generateKeyPairSync } = await import('node:crypto');
    const pem = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'pem', type: 'pkcs8' });
    await writeFile(rsa, pem, { mode: 0o600 });
    await expect(loadIdentity(rsa)).rejects.toMatchObject({ code: 'INVALID_KEY_FILE' });
  });
});

describe('self-signed certificate', () => {
  it('is a valid X.509 certificate of the agent key, self-signed with Ed25519', () => {
    const identity = Identity.generate();
    const cert = new X509Certificate(selfSignedCertificate(identity).cert);
    expect(cert.subject).toBe(`CN=${identity.id}`);
    expect(cert.verify(identity.publicKey)).toBe(true);
    expect(cert.publicKey.asymmetricKeyType).toBe('ed25519');
    expect(agentIdOfCertificate(cert)).toBe(identity.id);
    expect(new Date(cert.validFrom).getTime()).toBeLessThan(Date.now());
    expect(new Date(cert.validTo).getUTCFullYear()).toBe(9999);
  });

  it("the key read from a peer's certificate (as a JWK) is the one its SPKI DER carries, and verifies as that agent", () => {
    for (let i = 0; i < 20; i++) {
      const identity = Identity.generate();
      const cert = new X509Certificate(selfSignedCertificate(identity).certDer);
      const der = cert.publicKey.export({ format: 'der', type: 'spki' });
      const id = agentIdOfCertificate(cert);
      expect(Buffer.from(publicKeyFromAgentId(id))).toEqual(der.subarray(der.length - 32));
      expect(id).toBe(identity.id);
      const data = Buffer.from(`hello ${i}`);
      expect(verifySignature(id, data, identity.sign(data))).toBe(true);
    }
  });

  it('a certificate of a non-Ed25519 key is refused as UNAUTHENTICATED', async () => {
    const { generateKeyPairSync, createPublicKey } = await import('node:crypto');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const fake = { publicKey: createPublicKey(ec.privateKey) } as unknown as X509Certificate;
    expect(() => agentIdOfCertificate(fake)).toThrowError(expect.objectContaining({ code: 'UNAUTHENTICATED' }));
    expect(() => agentIdOfCertificate(undefined)).toThrowError(expect.objectContaining({ code: 'UNAUTHENTICATED' }));
  });

  it('secureContextOf makes one TLS 1.3 context per credentials, and both sides of a handshake prove their keys with it', async () => {
    const { connect, TLSSocket } = await import('node:tls');
    const { createServer } = await import('node:net');
    const server = Identity.generate();
    const client = Identity.generate();
    const serverTls = selfSignedCertificate(server);
    const clientTls = selfSignedCertificate(client);
    expect(secureContextOf(clientTls)).toBe(secureContextOf(clientTls));
    expect(secureContextOf(clientTls)).not.toBe(secureContextOf(selfSignedCertificate(client)));

    // The server side as the relay's secure tunnel runs it: a TLSSocket over a stream it was handed.
    const seenByServer: string[] = [];
    const listener = createServer((raw) => {
      const socket = new TLSSocket(raw, { isServer: true, secureContext: secureContextOf(serverTls), requestCert: true, rejectUnauthorized: false });
      socket.once('secure', () => {
        seenByServer.push(authenticatePeer(socket));
        socket.end();
      });
      socket.on('error', () => raw.destroy());
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const { port } = listener.address() as import('node:net').AddressInfo;
    try {
      for (let i = 0; i < 2; i++) {
        const socket = connect({ port, host: '127.0.0.1', secureContext: secureContextOf(clientTls), rejectUnauthorized: false });
        await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
        expect(socket.getProtocol()).toBe('TLSv1.3');
        expect(authenticatePeer(socket, server.id)).toBe(server.id);
        await new Promise((resolve) => socket.once('close', resolve).resume());
      }
      expect(seenByServer).toEqual([client.id, client.id]);
      // Older than 1.3 is refused by the shared context, as by the PEM options it replaces.
      const old = connect({ port, host: '127.0.0.1', maxVersion: 'TLSv1.2', rejectUnauthorized: false });
      await expect(new Promise((resolve, reject) => old.once('secureConnect', resolve).once('error', reject))).rejects.toThrow();
    } finally {
      listener.close();
    }
  });
});
