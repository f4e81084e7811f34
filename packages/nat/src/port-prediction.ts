import type { PeerRecord } from './record.js';

/**
 * Port prediction against a symmetric NAT that allocates ports in sequence: its next mappings are likely the
 * last one seen plus the step between its two STUN mappings (or +1 when that step was 0). Returns the peer's
 * candidates followed by `count` predicted URLs; only candidates for other NAT types.
 */
export function punchTargets(record: PeerRecord, count: number): string[] {
  const targets = [...record.candidates];
  const mapped = record.candidates[0] ? new URL(record.candidates[0]) : undefined;
  if (record.nat !== 'symmetric' || !mapped) return targets;
  const step = record.portDelta === 0 ? 1 : record.portDelta;
  for (let k = 1; k <= count; k++) {
    const port = Number(mapped.port) + step * k;
    if (port > 0 && port < 65536) targets.push(`quic://${mapped.hostname}:${port}`);
  }
  return targets;
}
