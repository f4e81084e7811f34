import { AgentError, errorCodeFromNumber, errorCodeToNumber } from './errors.js';

/**
 * The close code of a retired channel (docs/protocol.md "Retired channels"): its closer says "whatever you opened
 * here that I did not answer, I never processed", and the peer resends such calls at once on another channel, as
 * it does a stream refused unprocessed. The same number on every channel: the mux's GOAWAY code, QUIC's
 * application close code, and HTTP/2's GOAWAY (in its private range) with the reverse stream's mux GOAWAY.
 *
 * It lies outside the error codes' numbers (0..14): a peer from before it reads it as `UNKNOWN`, and fails its
 * calls there as it did with the plain close it replaced.
 */
export const RETIRED_CLOSE_CODE = 0x100;

/** Close reasons made by {@link retiredClose}: the transports send them with {@link RETIRED_CLOSE_CODE}. */
const retiredReasons = new WeakSet<AgentError>();

/**
 * The reason to close a retired channel with, once it has been free of streams for a quiet period and its closer
 * processes no stream that arrives on it from then on. Locally it is a plain `CLOSED`: our own streams on the
 * channel (there should be none) are not marked unprocessed.
 */
export function retiredClose(message: string): AgentError {
  const reason = new AgentError('CLOSED', message);
  retiredReasons.add(reason);
  return reason;
}

/** The number a transport's close or GOAWAY carries for `reason`. */
export function closeCodeOf(reason: AgentError): number {
  return retiredReasons.has(reason) ? RETIRED_CLOSE_CODE : errorCodeToNumber(reason.code);
}

/**
 * What the peer's close (code `n`, its text `text`) does to our streams on the channel: its plain `CLOSED` reads
 * as `UNAVAILABLE`; a retired channel's close fails them `UNAVAILABLE` and unprocessed (a call that read no reply
 * is resent at once: call-attempt.ts).
 */
export function peerCloseError(n: number, text: string): AgentError {
  if (n === RETIRED_CLOSE_CODE) return new AgentError('UNAVAILABLE', `peer closed the channel: ${text}`, { remote: true, unprocessed: true });
  const code = errorCodeFromNumber(n);
  return new AgentError(code === 'CLOSED' ? 'UNAVAILABLE' : code, `peer closed the channel: ${text}`, { remote: true });
}
