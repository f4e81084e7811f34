import { AgentError, isErrorCode } from '@agentlink/core';
import { errorCodeFromNumber, peerCloseError } from '@agentlink/core/transport';

/**
 * The engine reports failures as `CODE|detail` messages (see native/src/errors.rs). This turns them into the
 * AgentErrors every channel reports, so QUIC fails exactly like the other channels.
 */
export function fromNative(error: unknown, localReset?: AgentError): AgentError {
  if (error instanceof AgentError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const [kind = '', ...rest] = message.split('|');
  const detail = rest.join('|');
  switch (kind) {
    case 'RESET': {
      const code = errorCodeFromNumber(Number(detail));
      return new AgentError(code, `stream reset by peer (${code})`, { remote: true });
    }
    case 'LOCAL_RESET':
      return localReset ?? new AgentError(errorCodeFromNumber(Number(detail)), 'stream reset');
    case 'CLOSED_BY_PEER': {
      const [number = '0', ...reason] = detail.split('|');
      // A retired channel's close (RETIRED_CLOSE_CODE) fails our streams unprocessed: see docs/protocol.md.
      return peerCloseError(Number(number), reason.join('|'));
    }
    case 'ZERO_RTT_REJECTED':
      // The peer discarded our 0-RTT data (it lost its ticket, e.g. it restarted): the request never reached a
      // handler, so core resends it at once on a fresh stream, after the handshake.
      return new AgentError('UNAVAILABLE', `${detail}; resent after the handshake`, { unprocessed: true });
    default:
      return new AgentError(isErrorCode(kind) ? kind : 'UNAVAILABLE', detail || message, { cause: error });
  }
}
