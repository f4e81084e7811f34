import { describe, expect, it } from 'vitest';
import { MAX_UNANSWERED_KEPT, settleDiscovery, type NatDiscovery } from '../src/nat-type.js';

const learned: NatDiscovery = { type: 'cone', mapped: { host: '198.51.100.7', port: 40_000 }, portDelta: 0 };
const noAnswer: NatDiscovery = { type: 'unknown', mapped: undefined, portDelta: 0 };

describe('a registration whose STUN went unanswered', () => {
  it('keeps the NAT type and mapping learned before, for a bounded number of registrations in a row', () => {
    for (let before = 0; before < MAX_UNANSWERED_KEPT; before++) {
      expect(settleDiscovery(learned, noAnswer, before)).toEqual({ discovery: learned, kept: true });
    }
    // An agent that moved to a network where STUN goes unanswered published its old network's mapping for as long as
    // it ran (each heartbeat renewing its record); now, past the bound, it publishes that it does not know.
    expect(settleDiscovery(learned, noAnswer, MAX_UNANSWERED_KEPT)).toEqual({ discovery: noAnswer, kept: false });
    expect(settleDiscovery(learned, noAnswer, 1000)).toEqual({ discovery: noAnswer, kept: false });
  });

  it('keeps them whatever the count while an answer confirms the mapping, and publishes a different one', () => {
    const confirmed: NatDiscovery = { type: 'unknown', mapped: learned.mapped, portDelta: 0 };
    expect(settleDiscovery(learned, confirmed, MAX_UNANSWERED_KEPT)).toEqual({ discovery: learned, kept: true });
    const moved: NatDiscovery = { type: 'unknown', mapped: { host: '203.0.113.9', port: 5000 }, portDelta: 0 };
    expect(settleDiscovery(learned, moved, 0)).toEqual({ discovery: moved, kept: false });
  });
});
