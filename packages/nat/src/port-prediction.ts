import type { PeerRecord } from './record.js';

/**
 * How we guess a symmetric NAT's next ports: `single` when only the peer's NAT is symmetric; when both are, one
 * side (the lower AgentId) is `wide` and the other `sparse`, so that their probes cross (see punchTargets).
 */
export type PredictionRole = 'single' | 'wide' | 'sparse';

/**
 * Port prediction against a symmetric NAT that allocates ports in sequence: its next mappings are likely the
 * last one seen plus multiples of the step between its two STUN mappings (or +1 when that step was 0). Returns
 * the peer's candidates followed by the predicted URLs; only the candidates for other NAT types.
 *
 * When both NATs are symmetric, guessing the peer's next port is not enough: each of our dials to a new port
 * takes a new port on our NAT too, and both NATs have handed out some ports since their STUN mappings (the
 * "drift", unknown to either side). Two dials meet only when A sends from the port B aims at, to the port B sends
 * from. Rather than one guess, the sides probe a bounded set of pairs at once (birthday-style), arranged so that
 * the sets cross: the `wide` side aims at the peer's next 2 × `count` ports in order, the `sparse` side at every
 * second one (+1, +3, +5, …, `count` of them). The sparse side's m-th dial meets the wide side's
 * (drift_sparse + m)-th when the two drifts add up to m − 1, so any drift sum in [0, count − 1] is covered.
 */
export function punchTargets(record: PeerRecord, count: number, role: PredictionRole = 'single'): string[] {
  const targets = [...record.candidates];
  const mapped = record.candidates[0] ? new URL(record.candidates[0]) : undefined;
  if (record.nat !== 'symmetric' || !mapped) return targets;
  const step = record.portDelta === 0 ? 1 : record.portDelta;
  const predicted = role === 'wide' ? 2 * count : count;
  for (let k = 1; k <= predicted; k++) {
    const port = Number(mapped.port) + step * (role === 'sparse' ? 2 * k - 1 : k);
    if (port > 0 && port < 65536) targets.push(`quic://${mapped.hostname}:${port}`);
  }
  return targets;
}
