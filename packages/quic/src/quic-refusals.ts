import { agentIdFromPublicKey, type ErrorCode, type Refusal } from '@agentlink/core';
import type { ListenContext } from '@agentlink/core/transport';
import type { NativeEndpoint, NativeRefusal } from './native.js';

/** What the peer was told, where it was told anything: the code its own dial fails with. */
const CODE_SENT: Partial<Record<string, ErrorCode>> = {
  // QUIC CONNECTION_REFUSED, which the engine's dialler reports as RESOURCE_EXHAUSTED.
  'max-connections': 'RESOURCE_EXHAUSTED',
  'max-connections-per-ip': 'RESOURCE_EXHAUSTED',
  'ip-rate': 'RESOURCE_EXHAUSTED',
  // An idle connection closed to make room at a full listener: an application close with RESOURCE_EXHAUSTED.
  evicted: 'RESOURCE_EXHAUSTED',
  // A TLS alert, which a dialler reports as UNAUTHENTICATED.
  'no-certificate': 'UNAUTHENTICATED',
  'wrong-key': 'UNAUTHENTICATED',
  'wrong-key-type': 'UNAUTHENTICATED',
};

/** The core Refusal of one engine report. */
export function toRefusal(native: NativeRefusal): Refusal {
  const code = CODE_SENT[native.reason];
  return {
    stage: native.stage,
    reason: native.reason,
    kind: 'quic',
    remoteAddress: native.remoteAddress,
    // An evicted connection that had proved its key: named by it, as ws and HTTP/2 name theirs.
    ...(native.peerKey ? { peer: agentIdFromPublicKey(native.peerKey) } : {}),
    ...(code ? { code } : {}),
    ...(native.detail ? { detail: native.detail } : {}),
  };
}

/** Passes every refusal the engine reports to the agent until the endpoint closes. */
export async function reportRefusals(endpoint: NativeEndpoint, context: ListenContext): Promise<void> {
  for (;;) {
    const refusal = await endpoint.nextRefusal();
    if (!refusal) return;
    context.onRefused?.(toRefusal(refusal));
  }
}
