import { Identity } from '@agentlink/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  MAX_ACCEPTED_RELAYS,
  MAX_RELAY_HANDSHAKES,
  RELAY_HANDSHAKE_WAIT_MS,
  RELAY_HANDSHAKES_PER_SECOND,
  RelayAdmission,
} from '../src/relay-admission.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const rendezvous = Identity.generate().id;
const other = Identity.generate().id;
const never = new AbortController().signal;

/** Asks `n` turns of `from` at once; `granted` lists the releases of those given so far. */
function ask(admission: RelayAdmission, n: number, from = rendezvous, signal = never) {
  const granted: Array<() => void> = [];
  const failed: unknown[] = [];
  for (let i = 0; i < n; i++) admission.handshakeTurn(from, signal).then((release) => granted.push(release), (error: unknown) => failed.push(error));
  return { granted, failed };
}

describe('relays an agent did not ask for (fake clock)', () => {
  it('their handshakes run MAX_RELAY_HANDSHAKES at a time per rendezvous, in arrival order', async () => {
    const admission = new RelayAdmission(() => Date.now());
    const turns = ask(admission, MAX_RELAY_HANDSHAKES + 2);
    const elsewhere = ask(admission, 1, other);
    await vi.advanceTimersByTimeAsync(0);
    expect(turns.granted).toHaveLength(MAX_RELAY_HANDSHAKES);
    expect(admission.handshakesOf(rendezvous)).toBe(MAX_RELAY_HANDSHAKES);
    expect(elsewhere.granted).toHaveLength(1); // another rendezvous has turns of its own
    turns.granted[0]!();
    turns.granted[0]!(); // given back once only
    await vi.advanceTimersByTimeAsync(0);
    expect(turns.granted).toHaveLength(MAX_RELAY_HANDSHAKES + 1);
    expect(admission.handshakesOf(rendezvous)).toBe(MAX_RELAY_HANDSHAKES);
  });

  it('start at most RELAY_HANDSHAKES_PER_SECOND a second after a burst of twice that', async () => {
    const admission = new RelayAdmission(() => Date.now());
    const turns = ask(admission, 100);
    // Each handshake ends as soon as it starts: only the rate holds them back.
    const finish = async (): Promise<void> => {
      for (let done = 0; done < turns.granted.length; done++) turns.granted[done]!();
      await vi.advanceTimersByTimeAsync(0);
    };
    for (let i = 0; i < 20; i++) await finish();
    expect(turns.granted).toHaveLength(2 * RELAY_HANDSHAKES_PER_SECOND);
    await vi.advanceTimersByTimeAsync(1000 / RELAY_HANDSHAKES_PER_SECOND);
    for (let i = 0; i < 5; i++) await finish();
    expect(turns.granted).toHaveLength(2 * RELAY_HANDSHAKES_PER_SECOND + 1);
    await vi.advanceTimersByTimeAsync(1000 - 1000 / RELAY_HANDSHAKES_PER_SECOND);
    for (let i = 0; i < 20; i++) await finish();
    expect(turns.granted).toHaveLength(3 * RELAY_HANDSHAKES_PER_SECOND);
  });

  it('a tunnel waits RELAY_HANDSHAKE_WAIT_MS for its turn at most, and not once the agent closes', async () => {
    const admission = new RelayAdmission(() => Date.now());
    const closing = new AbortController();
    const turns = ask(admission, MAX_RELAY_HANDSHAKES + 2, rendezvous, closing.signal);
    await vi.advanceTimersByTimeAsync(RELAY_HANDSHAKE_WAIT_MS - 1);
    expect(turns.failed).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(turns.failed).toHaveLength(2);
    expect(turns.failed[0]).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
    const late = ask(admission, 1, rendezvous, closing.signal);
    closing.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(late.failed).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0); // no wait left behind
  });

  it('at most MAX_ACCEPTED_RELAYS are held; a place given back makes room for one more', () => {
    const admission = new RelayAdmission(() => Date.now());
    const places = Array.from({ length: MAX_ACCEPTED_RELAYS }, () => admission.admit());
    expect(() => admission.admit()).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED' }));
    places[0]!();
    places[0]!();
    expect(admission.accepted).toBe(MAX_ACCEPTED_RELAYS - 1);
    admission.admit();
    expect(() => admission.admit()).toThrow(expect.objectContaining({ code: 'RESOURCE_EXHAUSTED' }));
  });
});
