import { constants } from 'node:http2';
import { AgentError, type ErrorCode } from '@agentlink/core';
import { closeCodeOf, errorCodeFromNumber, errorCodeToNumber, RETIRED_CLOSE_CODE } from '@agentlink/core/transport';

/**
 * RST_STREAM / GOAWAY codes. agentlink codes travel in a private range (0xa6_0000 + the code's number) that no
 * standard code uses. HTTP/2's own CANCEL is not used for agentlink's CANCELLED: node resets every stream with
 * CANCEL when a session dies (e.g. the peer process was killed), and that must read as UNAVAILABLE.
 */
const PRIVATE_BASE = 0xa6_0000;

export function toHttp2Code(code: ErrorCode): number {
  return PRIVATE_BASE + errorCodeToNumber(code);
}

/** Whether `code` is one of agentlink's (an agent chose it), not one of HTTP/2's own. */
export function isAgentlinkCode(code: number): boolean {
  return code >= PRIVATE_BASE && code < PRIVATE_BASE + 0x1_0000;
}

/**
 * The GOAWAY or RST_STREAM code for `reason`: its code's, or a retired channel's own (retired-close.ts) — the
 * session's GOAWAY and the resets of its streams (the reverse stream's among them) all say it.
 */
export function http2CodeOf(reason: AgentError): number {
  return PRIVATE_BASE + closeCodeOf(reason);
}

/**
 * What a peer's GOAWAY does to our streams: a retired channel's fails them unprocessed (docs/protocol.md "Retired
 * channels"), a plain CLOSED reads as UNAVAILABLE, any other code as itself.
 */
export function fromGoawayCode(code: number): AgentError {
  if (isRetiredCode(code)) return new AgentError('UNAVAILABLE', 'peer sent GOAWAY (retired)', { remote: true, unprocessed: true });
  const peerCode = code === 0 ? 'UNAVAILABLE' : fromHttp2Code(code);
  return new AgentError(peerCode === 'CLOSED' ? 'UNAVAILABLE' : peerCode, `peer sent GOAWAY (${peerCode})`, { remote: true });
}

/** Whether `code` (a GOAWAY's or a reset's) is a retired channel's close. */
export function isRetiredCode(code: number): boolean {
  return code === PRIVATE_BASE + RETIRED_CLOSE_CODE;
}

export function fromHttp2Code(code: number): ErrorCode {
  if (isAgentlinkCode(code)) return errorCodeFromNumber(code - PRIVATE_BASE);
  switch (code) {
    case constants.NGHTTP2_CANCEL: // the session went away under the stream
    case constants.NGHTTP2_REFUSED_STREAM: // never processed: safe to retry elsewhere
    case constants.NGHTTP2_NO_ERROR:
      return 'UNAVAILABLE';
    case constants.NGHTTP2_ENHANCE_YOUR_CALM:
      return 'RESOURCE_EXHAUSTED';
    case constants.NGHTTP2_FRAME_SIZE_ERROR:
      return 'FRAME_TOO_LARGE';
    default:
      return 'PROTOCOL_ERROR';
  }
}
