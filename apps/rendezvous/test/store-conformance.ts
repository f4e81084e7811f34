import { Identity } from '@agentlink/core';
import { signRecord, type PeerRecord } from '@agentlink/nat';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RegistryStore, StoredRecord } from '../src/index.js';
import { recordOf } from './helpers.js';

/** Two views of one store: the same object in memory, two connections (as two instances) in Redis. */
export interface StorePair {
  store: RegistryStore;
  twin: RegistryStore;
  close(): Promise<void>;
}

const LIMITS = { maxRegistrations: 1000, maxRegistrationsPerIp: 1000 };

export function entry(identity: Identity, overrides: Partial<PeerRecord> = {}, ip = '192.0.2.1'): StoredRecord {
  const record = recordOf(identity, overrides);
  return { record, signed: signRecord(identity, record), ip };
}

/** Waits (on the store's answers, polled) until `check` holds; fails after `tries`. */
async function until(check: () => Promise<boolean>, tries = 100): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('condition never held');
}

/** The behaviour every RegistryStore shares: run against the memory store and against Redis. */
export function registryStoreConformance(name: string, open: () => Promise<StorePair>): void {
  describe(`RegistryStore conformance: ${name}`, () => {
    let pair: StorePair;
    beforeEach(async () => {
      pair = await open();
    });
    afterEach(async () => {
      await pair.close();
    });

    it('stores a record and serves it, the signed bytes unchanged, from either view', async () => {
      const me = Identity.generate();
      const stored = entry(me);
      expect(await pair.store.put(stored, LIMITS)).toEqual({ stored: true, isNew: true });
      const got = await pair.twin.get(me.id);
      expect(got?.record).toEqual(stored.record);
      expect(Buffer.from(got!.signed.record)).toEqual(Buffer.from(stored.signed.record));
      expect(Buffer.from(got!.signed.signature)).toEqual(Buffer.from(stored.signed.signature));
      expect(got?.ip).toBe('192.0.2.1');
      expect(await pair.store.get(Identity.generate().id)).toBeUndefined();
      expect(await pair.store.size()).toBe(1);
    });

    it('a heartbeat (higher sequence) replaces the record; an equal or lower one is a replay', async () => {
      const me = Identity.generate();
      await pair.store.put(entry(me, { seq: 10 }), LIMITS);
      expect(await pair.twin.put(entry(me, { seq: 10 }), LIMITS)).toEqual({ stored: false, reason: 'replayed', storedSeq: 10 });
      expect(await pair.twin.put(entry(me, { seq: 9 }), LIMITS)).toEqual({ stored: false, reason: 'replayed', storedSeq: 10 });
      expect(await pair.twin.put(entry(me, { seq: 11, candidates: ['quic://203.0.113.7:40001'] }), LIMITS)).toEqual({ stored: true, isNew: false });
      expect((await pair.store.get(me.id))?.record.candidates).toEqual(['quic://203.0.113.7:40001']);
      expect(await pair.store.size()).toBe(1);
    });

    it('of many puts of one record at once, through both views, exactly one is stored', async () => {
      const me = Identity.generate();
      const same = entry(me, { seq: 5 });
      const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? pair.store : pair.twin).put(same, LIMITS)));
      expect(outcomes.filter((o) => o.stored)).toHaveLength(1);
      expect(outcomes.filter((o) => !o.stored && o.reason === 'replayed')).toHaveLength(39);
    });

    it('refuses a new agent when full or when its IP holds its share, but not a heartbeat', async () => {
      const limits = { maxRegistrations: 3, maxRegistrationsPerIp: 2 };
      const [a, b, c, d] = [Identity.generate(), Identity.generate(), Identity.generate(), Identity.generate()];
      expect(await pair.store.put(entry(a, {}, '192.0.2.1'), limits)).toMatchObject({ stored: true });
      expect(await pair.store.put(entry(b, {}, '192.0.2.1'), limits)).toMatchObject({ stored: true });
      expect(await pair.twin.put(entry(c, {}, '192.0.2.1'), limits)).toEqual({ stored: false, reason: 'per-ip' });
      expect(await pair.store.countByIp('192.0.2.1')).toBe(2);
      expect(await pair.twin.put(entry(c, {}, '192.0.2.2'), limits)).toMatchObject({ stored: true });
      expect(await pair.twin.put(entry(d, {}, '192.0.2.3'), limits)).toEqual({ stored: false, reason: 'full' });
      expect(await pair.store.put(entry(a, { seq: 2 }, '192.0.2.1'), limits)).toEqual({ stored: true, isNew: false });
      // An agent that moves to another IP is counted there only.
      expect(await pair.store.put(entry(b, { seq: 2 }, '192.0.2.4'), limits)).toEqual({ stored: true, isNew: false });
      expect(await pair.store.countByIp('192.0.2.1')).toBe(1);
      expect(await pair.store.countByIp('192.0.2.4')).toBe(1);
    });

    it('counts an IPv6 client per /64, as every other per-IP limit (one host usually holds a whole /64)', async () => {
      const limits = { maxRegistrations: 10, maxRegistrationsPerIp: 2 };
      const [a, b, c, d] = [Identity.generate(), Identity.generate(), Identity.generate(), Identity.generate()];
      expect(await pair.store.put(entry(a, {}, '2001:db8:1:2::1'), limits)).toMatchObject({ stored: true });
      expect(await pair.store.put(entry(b, {}, '2001:db8:1:2:ffff::9'), limits)).toMatchObject({ stored: true });
      // A third address of the same /64 is the same client: until 2026-11-24 each address had its own 1,000.
      expect(await pair.twin.put(entry(c, {}, '2001:db8:1:2:abcd::3'), limits)).toEqual({ stored: false, reason: 'per-ip' });
      expect(await pair.store.countByIp('2001:db8:1:2::77')).toBe(2);
      // The next /64 is another client; the record keeps the address it registered from (punches aim there).
      expect(await pair.twin.put(entry(c, {}, '2001:db8:1:3::1'), limits)).toMatchObject({ stored: true });
      expect((await pair.store.get(c.id))?.ip).toBe('2001:db8:1:3::1');
      // An agent that moves within its /64 stays counted once; one that leaves it frees a place there.
      expect(await pair.store.put(entry(a, { seq: 2 }, '2001:db8:1:2::5'), limits)).toEqual({ stored: true, isNew: false });
      expect(await pair.store.countByIp('2001:db8:1:2::1')).toBe(2);
      expect(await pair.store.put(entry(b, { seq: 2 }, '192.0.2.4'), limits)).toEqual({ stored: true, isNew: false });
      expect(await pair.store.countByIp('2001:db8:1:2::1')).toBe(1);
      expect(await pair.twin.put(entry(d, {}, '2001:db8:1:2::d'), limits)).toMatchObject({ stored: true });
      // An IPv4-mapped address counts as its IPv4 address.
      expect(await pair.store.countByIp('::ffff:192.0.2.4')).toBe(1);
    });

    it('a record is gone when it expires: not served, not counted, and its room is free again', async () => {
      const limits = { maxRegistrations: 1, maxRegistrationsPerIp: 1 };
      const [short, next] = [Identity.generate(), Identity.generate()];
      await pair.store.put(entry(short, { expiresAt: Date.now() + 300 }), limits);
      expect(await pair.twin.get(short.id)).toBeDefined();
      await until(async () => (await pair.twin.get(short.id)) === undefined);
      await pair.store.sweep(Date.now());
      expect(await pair.store.size()).toBe(0);
      expect(await pair.store.countByIp('192.0.2.1')).toBe(0);
      expect(await pair.twin.put(entry(next), limits)).toEqual({ stored: true, isNew: true });
      // After expiry, the agent's next record is a new registration (its sequence starts over from the record).
      expect(await pair.store.put(entry(short, { seq: 1 }, '192.0.2.9'), { maxRegistrations: 2, maxRegistrationsPerIp: 1 })).toEqual({ stored: true, isNew: true });
    });
  });
}
