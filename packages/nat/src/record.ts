import { AgentError, isAgentId, verifySignature, type AgentId, type Identity } from '@agentlink/core';
import { Packr } from 'msgpackr';
import { z } from 'zod';

/** What the NAT in front of an agent does to its mappings, as STUN from two server ports showed. */
export type NatType = 'none' | 'cone' | 'symmetric' | 'unknown';

/** Where an agent can be reached, signed by its own key: the rendezvous stores it but cannot forge it. */
export interface PeerRecord {
  agentId: AgentId;
  /** Dialable URLs: public mapping first (e.g. `quic://203.0.113.7:40123`), then LAN addresses. */
  candidates: string[];
  nat: NatType;
  /** Port step between two STUN mappings of a symmetric NAT (0 when unknown): port prediction uses it. */
  portDelta: number;
  /** Grows with every registration; an older one is a replay. */
  seq: number;
  /** Epoch ms after which the record is void. */
  expiresAt: number;
}

export interface SignedRecord {
  /** The record, MessagePack-encoded: the exact bytes that were signed. */
  record: Uint8Array;
  signature: Uint8Array;
}

/** Largest encoded record accepted; candidates are a handful of short URLs. */
export const MAX_RECORD_BYTES = 2048;
const MAX_CANDIDATES = 16;
/** Signatures are over this prefix and the record, so they cannot be replayed as another kind of message. */
const DOMAIN = Buffer.from('agentlink-record-v1\0');

const packr = new Packr({ useRecords: false, variableMapSize: true });

const recordSchema = z
  .object({
    agentId: z.string().refine(isAgentId, 'not an AgentId'),
    candidates: z.array(z.string().max(256)).max(MAX_CANDIDATES),
    nat: z.enum(['none', 'cone', 'symmetric', 'unknown']),
    portDelta: z.number().int().min(-65535).max(65535),
    seq: z.number().int().nonnegative(),
    expiresAt: z.number().int().nonnegative(),
  })
  .strict();

export function signRecord(identity: Identity, record: PeerRecord): SignedRecord {
  if (record.agentId !== identity.id) throw new AgentError('INVALID_ARGUMENT', 'a record is signed by the agent it describes');
  const bytes = packr.pack(record);
  return { record: bytes, signature: identity.sign(Buffer.concat([DOMAIN, bytes])) };
}

/**
 * Checks a signed record: size, shape, the signature of the agent it names, and that it has not expired.
 * Throws INVALID_ARGUMENT (malformed or oversize), UNAUTHENTICATED (forged) or DEADLINE_EXCEEDED (expired).
 */
export function verifyRecord(signed: SignedRecord, now = Date.now()): PeerRecord {
  if (!(signed?.record instanceof Uint8Array) || !(signed.signature instanceof Uint8Array)) {
    throw new AgentError('INVALID_ARGUMENT', 'a signed record is { record: bytes, signature: bytes }');
  }
  if (signed.record.length > MAX_RECORD_BYTES) {
    throw new AgentError('INVALID_ARGUMENT', `record of ${signed.record.length} bytes exceeds ${MAX_RECORD_BYTES}`);
  }
  let decoded: unknown;
  try {
    decoded = packr.unpack(signed.record);
  } catch {
    throw new AgentError('INVALID_ARGUMENT', 'record is not valid MessagePack');
  }
  const parsed = recordSchema.safeParse(decoded);
  if (!parsed.success) throw new AgentError('INVALID_ARGUMENT', `malformed record: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  const record = parsed.data as PeerRecord;
  if (!verifySignature(record.agentId, Buffer.concat([DOMAIN, signed.record]), signed.signature)) {
    throw new AgentError('UNAUTHENTICATED', `record for ${record.agentId} is not signed by its key`);
  }
  if (record.expiresAt <= now) throw new AgentError('DEADLINE_EXCEEDED', `record for ${record.agentId} expired`);
  return record;
}
