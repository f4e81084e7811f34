// zlib.crc32 is Node >= 20.15 (the package's engines say so).
import { crc32 } from 'node:zlib';
import { stunLibrary, type DecodedStunMessage } from './stun-library.js';

/** What the server did with one datagram; each is a label of `rendezvous_stun_requests_total`. */
export type StunOutcome =
  /** A Binding success response was sent. */
  | 'answered'
  /** A 420 error response listing unknown comprehension-required attributes was sent. */
  | 'unknown-attribute'
  /** Dropped: more Binding requests from this IP than its rate allows. */
  | 'rate'
  /** Dropped: larger than any Binding request needs to be. */
  | 'too-large'
  /** Dropped: not a well-formed STUN message. */
  | 'malformed'
  /** Dropped: another method than Binding, or an indication or a response. */
  | 'not-binding-request'
  /** Dropped: a FINGERPRINT that is not the last attribute or does not match. */
  | 'bad-fingerprint';

export interface StunAnswer {
  outcome: StunOutcome;
  /** The datagram to send back, when there is one. */
  answer?: Buffer;
}

const HEADER_BYTES = 20;
const MAGIC_COOKIE = 0x2112a442;
const BINDING_REQUEST = 0x0001;
const BINDING_SUCCESS_RESPONSE = 0x0101;
const BINDING_ERROR_RESPONSE = 0x0111;
const FINGERPRINT = 0x8028;
const FINGERPRINT_BYTES = 8;
const FINGERPRINT_XOR = 0x5354554e;
const MESSAGE_INTEGRITY = 0x0008;
const MESSAGE_INTEGRITY_SHA256 = 0x001c;
const UNKNOWN_ATTRIBUTE = 420;
/** Types 0x0000-0x7FFF are comprehension-required (RFC 8489 §14, RFC 5389 §15). */
const COMPREHENSION_OPTIONAL_FROM = 0x8000;

/**
 * Requests larger than this are dropped before decoding. RFC 8489 §6.2.1 asks STUN over UDP to stay under the
 * path MTU, 1,280 bytes when it is unknown for IPv6 (576 for IPv4); a Binding request is 20-100 bytes.
 */
export const MAX_REQUEST_BYTES = 1280;

/**
 * The comprehension-required attributes RFC 5389/8489 define. This server uses no authentication (the
 * "no authentication" usage of RFC 8489 §9), so it knows these and ignores them; any other type below 0x8000
 * in a request is unknown and gets a 420 (RFC 5389 §7.3.1). RFC 5780's CHANGE-REQUEST (0x0003) is deliberately
 * not here: the rendezvous cannot answer from another address, and a 420 is how a client learns that.
 */
const KNOWN_COMPREHENSION_REQUIRED = new Set([
  0x0001, // MAPPED-ADDRESS
  0x0006, // USERNAME
  MESSAGE_INTEGRITY,
  0x0009, // ERROR-CODE
  0x000a, // UNKNOWN-ATTRIBUTES
  0x0014, // REALM
  0x0015, // NONCE
  MESSAGE_INTEGRITY_SHA256,
  0x001d, // PASSWORD-ALGORITHM
  0x001e, // USERHASH
  0x0020, // XOR-MAPPED-ADDRESS
]);

/**
 * Answers one datagram received on a rendezvous STUN port (rate limiting happens before, in the server).
 *
 * Only Binding requests get an answer. RFC 5389 §7.3 has a receiver check that "the method value is a
 * supported method" and that the class is allowed, and FINGERPRINT when present, and says "if any errors are
 * detected, the message is silently discarded": other methods, indications (never answered, §7.3.2) and
 * responses (no transaction of ours is in progress) are dropped without a word, so the port reflects nothing
 * but Binding. A request with unknown comprehension-required attributes gets a 420 error response with
 * UNKNOWN-ATTRIBUTES (§7.3.1). Every answer carries XOR-MAPPED-ADDRESS (or ERROR-CODE) and FINGERPRINT only:
 * no SOFTWARE, so an answer is at most 2× a minimal request for IPv4 (40 bytes for 20), 2.6× for IPv6
 * (52 for 20), and 2.67× for the smallest request that earns a 420 (64 bytes for 24).
 */
export function answerStun(datagram: Buffer, from: { address: string; port: number }): StunAnswer {
  if (datagram.length > MAX_REQUEST_BYTES) return { outcome: 'too-large' };
  if (!wellFormedHeader(datagram)) return { outcome: 'malformed' };
  if (datagram.readUInt16BE(0) !== BINDING_REQUEST) return { outcome: 'not-binding-request' };
  let request: DecodedStunMessage;
  try {
    request = stunLibrary.decode(datagram);
  } catch {
    return { outcome: 'malformed' };
  }
  const attributes = [...request];
  if (!fingerprintHolds(datagram, attributes.map((a) => a.type))) return { outcome: 'bad-fingerprint' };

  const unknown = unknownComprehensionRequired(attributes.map((a) => a.type));
  if (unknown.length > 0) {
    const error = stunLibrary.createMessage(BINDING_ERROR_RESPONSE, request.transactionId);
    error.addError(UNKNOWN_ATTRIBUTE);
    error.addUnknownAttributes(unknown);
    error.addFingerprint();
    return { outcome: 'unknown-attribute', answer: error.toBuffer() };
  }
  const response = stunLibrary.createMessage(BINDING_SUCCESS_RESPONSE, request.transactionId);
  response.addXorAddress(from.address, from.port);
  response.addFingerprint();
  return { outcome: 'answered', answer: response.toBuffer() };
}

/** RFC 5389 §6: top two bits zero, the magic cookie, a length that is the rest of the datagram, a multiple of 4. */
function wellFormedHeader(datagram: Buffer): boolean {
  if (datagram.length < HEADER_BYTES) return false;
  if ((datagram[0]! & 0xc0) !== 0) return false;
  if (datagram.readUInt32BE(4) !== MAGIC_COOKIE) return false;
  const length = datagram.readUInt16BE(2);
  return length % 4 === 0 && length === datagram.length - HEADER_BYTES;
}

/**
 * FINGERPRINT, when present, must be the last attribute (RFC 5389 §15.5) and hold the CRC-32 of the message
 * before it XOR 0x5354554e. Computed over the bytes received: the library's own check re-encodes the decoded
 * message, which leaves out the values of attributes it does not know and so fails on valid messages.
 */
function fingerprintHolds(datagram: Buffer, types: number[]): boolean {
  const at = types.indexOf(FINGERPRINT);
  if (at === -1) return true;
  if (at !== types.length - 1) return false;
  const covered = datagram.subarray(0, datagram.length - FINGERPRINT_BYTES);
  return ((crc32(covered) ^ FINGERPRINT_XOR) >>> 0) === datagram.readUInt32BE(datagram.length - 4);
}

/**
 * The unknown comprehension-required types, in order, each once. Attributes after MESSAGE-INTEGRITY(-SHA256)
 * are ignored, as RFC 8489 §9 requires (except FINGERPRINT, which is known).
 */
function unknownComprehensionRequired(types: number[]): number[] {
  const unknown = new Set<number>();
  for (const type of types) {
    if (type < COMPREHENSION_OPTIONAL_FROM && !KNOWN_COMPREHENSION_REQUIRED.has(type)) unknown.add(type);
    if (type === MESSAGE_INTEGRITY || type === MESSAGE_INTEGRITY_SHA256) break;
  }
  return [...unknown];
}
