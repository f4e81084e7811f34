import { createRequire } from 'node:module';

/**
 * The parts of `@msimerson/stun` (the STUN library agentlink's client side uses, in packages/nat) that the
 * rendezvous' STUN server uses: its decoder and its response encoder. The library ships no types, and
 * packages/nat declares the module ambiently for its own use; a second ambient declaration here would merge
 * with that one in the repository-wide typecheck (and clash on its constants), so the server loads the
 * library with `require` and types the few calls it makes, here.
 */
export interface StunAttribute {
  readonly type: number;
}

export interface DecodedStunMessage extends Iterable<StunAttribute> {
  readonly type: number;
  readonly transactionId: Buffer;
  getAttribute(type: number): StunAttribute | undefined;
}

export interface OutgoingStunMessage {
  addXorAddress(address: string, port: number): unknown;
  addError(code: number, reason?: string): unknown;
  addUnknownAttributes(types: number[]): unknown;
  addFingerprint(): boolean;
  toBuffer(): Buffer;
}

interface StunLibrary {
  decode(message: Buffer): DecodedStunMessage;
  createMessage(type: number, transaction: Buffer): OutgoingStunMessage;
}

export const stunLibrary = createRequire(import.meta.url)('@msimerson/stun') as StunLibrary;
