import { X509Certificate, randomBytes, type KeyObject } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { AgentError } from '../errors.js';
import { agentIdFromPublicKey, type AgentId } from './agent-id.js';
import { bitString, explicit, objectIdentifier, sequence, set, time, unsignedInteger, utf8String } from './der.js';
import { rawPublicKey, type Identity } from './identity.js';

const ED25519 = '1.3.101.112';
const COMMON_NAME = '2.5.4.3';
/** RFC 5280's "no well-defined expiration date": the key, not the certificate, is what peers trust. */
const NO_EXPIRY = new Date(Date.UTC(9999, 11, 31, 23, 59, 59));

/** Key and certificate whose certificate key is the agent's own Ed25519 key: PEM for node:tls, DER for QUIC. */
export interface TlsCredentials {
  key: string;
  cert: string;
  /** PKCS#8 DER of the private key. */
  keyDer: Buffer;
  certDer: Buffer;
}

/**
 * A self-signed X.509 v3 certificate for the agent's Ed25519 key, with the AgentId as common name. Peers do not
 * trust it through a CA: they pin its public key to the AgentId they expect, and TLS 1.3's CertificateVerify
 * proves the holder owns that key.
 */
export function selfSignedCertificate(identity: Identity, now = new Date()): TlsCredentials {
  const algorithm = sequence(objectIdentifier(ED25519));
  const name = sequence(set(sequence(objectIdentifier(COMMON_NAME), utf8String(identity.id))));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = sequence(
    explicit(0, unsignedInteger(Buffer.from([2]))), // version 3
    unsignedInteger(serial),
    algorithm,
    name,
    sequence(time(new Date(now.getTime() - 3_600_000)), time(NO_EXPIRY)),
    name,
    identity.publicKey.export({ format: 'der', type: 'spki' }),
  );
  const der = sequence(tbs, algorithm, bitString(identity.sign(tbs)));
  return {
    key: identity.exportPrivateKeyPem(),
    cert: toPem(der),
    keyDer: identity.privateKeyObject().export({ format: 'der', type: 'pkcs8' }),
    certDer: der,
  };
}

const secureContexts = new WeakMap<TlsCredentials, SecureContext>();

/**
 * The node:tls context of these credentials (TLS 1.3 only), made once and shared by every TLS socket that uses
 * them, client or server side. Given a key and certificate instead, node parses both PEMs for every connection:
 * ~0.6 ms of each dial, measured.
 */
export function secureContextOf(tls: TlsCredentials): SecureContext {
  let context = secureContexts.get(tls);
  if (!context) {
    context = createSecureContext({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
    secureContexts.set(tls, context);
  }
  return context;
}

function toPem(der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** The AgentId a peer proved in the TLS handshake: the Ed25519 key of its certificate. */
export function agentIdOfCertificate(cert: X509Certificate | undefined): AgentId {
  if (!cert) throw new AgentError('UNAUTHENTICATED', 'peer presented no certificate');
  return agentIdFromPublicKey(rawPublicKey(cert.publicKey as KeyObject));
}

/** Minimal view of a TLS socket, so any TLS-based transport (ws, http2, relay) can use the same check. */
export interface PeerCertificateSource {
  /** The peer's certificate, once the TLS handshake completed. */
  getPeerX509Certificate(): X509Certificate | undefined;
}

/**
 * The one authentication check every TLS channel runs: returns the peer's AgentId, and when `expected` is given,
 * throws UNAUTHENTICATED unless the peer's certificate key is exactly that agent's key.
 */
export function authenticatePeer(socket: PeerCertificateSource, expected?: AgentId): AgentId {
  const actual = agentIdOfCertificate(socket.getPeerX509Certificate());
  if (expected !== undefined && actual !== expected) {
    throw new AgentError('UNAUTHENTICATED', `peer key mismatch: dialled ${expected}, peer proved ${actual}`);
  }
  return actual;
}
