import { AgentError } from '../errors.js';

/**
 * An agent is addressed by its Ed25519 public key. AgentId is that key in lowercase RFC 4648 base32 without
 * padding: 52 characters, URL-safe, and case-insensitive (input in any case is accepted and normalised).
 */
export type AgentId = string & { readonly __brand: 'AgentId' };

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const PUBLIC_KEY_BYTES = 32;
/** Length in characters of an {@link AgentId} (base32 of a 32-byte Ed25519 public key). */
export const AGENT_ID_LENGTH = Math.ceil((PUBLIC_KEY_BYTES * 8) / 5);

const ALPHABET_CODES = [...ALPHABET].map((ch) => ch.charCodeAt(0));
const VALUE_OF = new Map<string, number>([...ALPHABET].map((ch, i) => [ch, i]));

/** The {@link AgentId} of a raw 32-byte Ed25519 public key. */
export function agentIdFromPublicKey(raw: Uint8Array): AgentId {
  if (raw.length !== PUBLIC_KEY_BYTES) {
    throw new AgentError('INVALID_ARGUMENT', `an Ed25519 public key has ${PUBLIC_KEY_BYTES} bytes, got ${raw.length}`);
  }
  // Character codes first, one string at the end: `out += char` left a rope of 52 cons strings (~1.3 KiB) behind
  // every id a channel or pool entry keeps, per connected peer (docs/performance-log.md, "Server memory per idle peer").
  const codes = new Array<number>(AGENT_ID_LENGTH);
  let index = 0;
  let bits = 0;
  let value = 0;
  for (const byte of raw) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      codes[index++] = ALPHABET_CODES[(value >>> (bits - 5)) & 31]!;
      bits -= 5;
    }
  }
  if (bits > 0) codes[index++] = ALPHABET_CODES[(value << (5 - bits)) & 31]!;
  return String.fromCharCode(...codes) as AgentId;
}

/** The raw 32-byte Ed25519 public key an {@link AgentId} names; throws an INVALID_ARGUMENT AgentError for text that is not one. */
export function publicKeyFromAgentId(id: string): Uint8Array {
  const text = id.toLowerCase();
  if (text.length !== AGENT_ID_LENGTH) {
    throw new AgentError('INVALID_ARGUMENT', `an AgentId has ${AGENT_ID_LENGTH} base32 characters, got ${text.length}`);
  }
  const out = new Uint8Array(PUBLIC_KEY_BYTES);
  let bits = 0;
  let value = 0;
  let index = 0;
  for (const ch of text) {
    const v = VALUE_OF.get(ch);
    if (v === undefined) throw new AgentError('INVALID_ARGUMENT', `an AgentId is base32 (a-z, 2-7); found "${ch}"`);
    value = ((value << 5) | v) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      out[index++] = (value >>> (bits - 8)) & 0xff;
      bits -= 8;
    }
  }
  // The last character carries 1 bit of key and 4 padding bits, which must be zero for a canonical id.
  if ((value & ((1 << bits) - 1)) !== 0) throw new AgentError('INVALID_ARGUMENT', 'AgentId is not canonical');
  return out;
}

/** Validates and normalises text to an AgentId. */
export function parseAgentId(text: string): AgentId {
  return agentIdFromPublicKey(publicKeyFromAgentId(text));
}

/** Whether `text` is a well-formed {@link AgentId}. */
export function isAgentId(text: unknown): text is AgentId {
  if (typeof text !== 'string') return false;
  try {
    return parseAgentId(text) === text;
  } catch {
    return false;
  }
}
