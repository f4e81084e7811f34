import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConnectionGroups, MIN_IDLE_MS_BEFORE_EVICTION } from '../src/listener/connection-groups.js';
import { ConnectionAdmission, type AdmissionTicket } from '../src/listener/listener-limits.js';

const HONEST = '192.0.2.1';
const ATTACKER = '192.0.2.66';
const OTHER_ATTACKER = '192.0.2.77';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A ticket, with a record of whether it was evicted. */
function admit(admission: ConnectionAdmission, ip: string): AdmissionTicket & { evicted: boolean } {
  const ticket = admission.admit(ip);
  if (typeof ticket === 'string') throw new Error(`${ip} refused: ${ticket}`);
  const tracked = Object.assign(ticket, { evicted: false });
  ticket.onEvict(() => (tracked.evicted = true));
  return tracked;
}

describe('eviction at a full listener', () => {
  it('a newcomer from a small group evicts the idle connection of the group holding the most, idle the longest', () => {
    const admission = new ConnectionAdmission({ maxConnections: 4, maxConnectionsPerIp: 3 });
    const attackers = [admit(admission, ATTACKER), admit(admission, ATTACKER), admit(admission, ATTACKER)];
    const honest = admit(admission, HONEST);
    // Each attacker connection made one call, the second one last: the first has been idle the longest.
    vi.advanceTimersByTime(10);
    for (const ticket of attackers) ticket.busy();
    attackers[0]!.idle();
    vi.advanceTimersByTime(10);
    attackers[2]!.idle();
    vi.advanceTimersByTime(10);
    attackers[1]!.idle();
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);

    const newcomer = admission.admit(HONEST);
    expect(typeof newcomer).toBe('object');
    expect(attackers.map((t) => t.evicted)).toEqual([true, false, false]);
    expect(honest.evicted).toBe(false);
    expect(admission.connections).toBe(4);
    expect(admission.evictions).toBe(1);
  });

  it('refuses a newcomer whose group holds as many, or one fewer, than the group holding the most', () => {
    const admission = new ConnectionAdmission({ maxConnections: 4, maxConnectionsPerIp: 3 });
    admit(admission, ATTACKER);
    admit(admission, ATTACKER);
    admit(admission, HONEST);
    admit(admission, HONEST);
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
    // 2 against 2: taking one would leave the newcomer's group the larger, and the other would take it back.
    expect(admission.admit(HONEST)).toBe('max-connections');
    expect(admission.admit(ATTACKER)).toBe('max-connections');
    expect(admission.evictions).toBe(0);
  });

  it('the evicted group redials in vain: it is below the top now, and cannot take the honest place back', () => {
    const admission = new ConnectionAdmission({ maxConnections: 4, maxConnectionsPerIp: 3 });
    const attackers = [admit(admission, ATTACKER), admit(admission, ATTACKER), admit(admission, ATTACKER)];
    admit(admission, HONEST);
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
    admit(admission, HONEST); // evicts one attacker connection: 2 and 2
    expect(attackers.filter((t) => t.evicted)).toHaveLength(1);
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
    for (let i = 0; i < 3; i++) expect(admission.admit(ATTACKER)).toBe('max-connections');
    expect(admission.evictions).toBe(1);
  });

  it('never evicts a connection with a stream open, nor one idle for less than the minimum; refuses then', () => {
    const admission = new ConnectionAdmission({ maxConnections: 3, maxConnectionsPerIp: 3 });
    const attackers = [admit(admission, ATTACKER), admit(admission, ATTACKER), admit(admission, ATTACKER)];
    attackers[0]!.busy();
    attackers[1]!.busy();
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION - 1);
    attackers[2]!.busy();
    attackers[2]!.idle(); // idle again, but only just
    vi.advanceTimersByTime(1);
    expect(admission.admit(HONEST)).toBe('max-connections');
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION - 2); // idle for the minimum less 1 ms
    expect(admission.admit(HONEST)).toBe('max-connections');
    vi.advanceTimersByTime(1);
    expect(typeof admission.admit(HONEST)).toBe('object');
    expect(attackers.map((t) => t.evicted)).toEqual([false, false, true]);
  });

  it('takes only from a group holding the most: a small honest group is never evicted while a larger group exists', () => {
    const admission = new ConnectionAdmission({ maxConnections: 6, maxConnectionsPerIp: 4 });
    const honest = admit(admission, HONEST); // idle the longest of all
    vi.advanceTimersByTime(10);
    const big = [admit(admission, ATTACKER), admit(admission, ATTACKER), admit(admission, ATTACKER)];
    const other = [admit(admission, OTHER_ATTACKER), admit(admission, OTHER_ATTACKER)];
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
    // A fresh group (0) takes from the group of 3, not from the honest 1 nor the 2, though both are idle too.
    admit(admission, '192.0.2.200');
    expect([honest.evicted, big.filter((t) => t.evicted).length, other.filter((t) => t.evicted).length]).toEqual([false, 1, 0]);
    // Now 2, 2, 1, 1 (top 2): a group of 1 may not take a place (it would reach 2 and leave 1).
    expect(admission.admit(HONEST)).toBe('max-connections');
    // An empty group may, from one of the groups of 2.
    admit(admission, '192.0.2.201');
    expect(honest.evicted).toBe(false);
    expect(admission.evictions).toBe(2);
  });

  it('an eviction is paid with the newcomer’s per-IP rate: a refused rate evicts nothing', () => {
    const admission = new ConnectionAdmission({ maxConnections: 4, maxConnectionsPerIp: 4, newConnectionsPerIpPerSecond: 1 });
    for (let i = 0; i < 5; i++) admit(admission, HONEST).release(); // the honest IP's burst (5) is spent
    const attackers = [0, 1, 2, 3].map(() => admit(admission, ATTACKER));
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION); // one token back at 1/s
    expect(typeof admission.admit(HONEST)).toBe('object'); // 1 against 3
    expect(admission.admit(HONEST)).toBe('ip-rate'); // 1 against 3 again could evict, but the rate says no
    expect(attackers.filter((t) => t.evicted)).toHaveLength(1);
    expect(admission.evictions).toBe(1);
  });

  it('a connection still in its handshake (never busy) counts as idle since it arrived; a released one is never a victim', () => {
    const admission = new ConnectionAdmission({ maxConnections: 2, maxConnectionsPerIp: 2 });
    const first = admit(admission, ATTACKER);
    const second = admit(admission, ATTACKER);
    first.release();
    admit(admission, ATTACKER);
    vi.advanceTimersByTime(MIN_IDLE_MS_BEFORE_EVICTION);
    admit(admission, HONEST);
    expect(first.evicted).toBe(false);
    expect(second.evicted).toBe(true);
    // The evicted place was given back at once: its later release does not free a second one.
    second.release();
    expect(admission.connections).toBe(2);
  });
});

describe('ConnectionGroups', () => {
  it('knows the top count as groups grow and shrink, without a scan', () => {
    const groups = new ConnectionGroups();
    const a = [groups.add('a', 0), groups.add('a', 0), groups.add('a', 0)];
    const b = [groups.add('b', 0), groups.add('b', 0)];
    expect(groups.topCount).toBe(3);
    groups.remove(a[0]!);
    expect(groups.topCount).toBe(2);
    groups.remove(a[1]!);
    expect(groups.topCount).toBe(2);
    groups.remove(b[0]!);
    groups.remove(b[1]!);
    expect(groups.topCount).toBe(1);
    groups.remove(a[2]!);
    expect(groups.topCount).toBe(0);
    expect(groups.count('a')).toBe(0);
  });

  it('looks at a bounded number of tied groups per arrival', () => {
    const groups = new ConnectionGroups();
    // 1,000 groups of 2 tie at the top, idle; only the last one's connections are old enough to evict.
    const held = Array.from({ length: 1000 }, (_, i) => [groups.add(`g${i}`, i === 999 ? 0 : 4500), groups.add(`g${i}`, i === 999 ? 0 : 4500)]);
    // Bounded work: the arrival looks at a few of the tied groups (the first ones), so it does not find it.
    expect(groups.victimFor('new', 5000, 1000)).toBeUndefined();
    // Busy groups leave the index of groups with an idle connection: with the others busy, it is found.
    for (const pair of held.slice(0, 999)) for (const h of pair) groups.markBusy(h);
    expect(groups.victimFor('new', 5000, 1000)).toBe(held[999]![0]);
  });
});
