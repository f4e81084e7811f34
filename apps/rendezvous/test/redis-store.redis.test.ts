import { randomUUID } from 'node:crypto';
import { Identity } from '@agentlink/core';
import { signRecord } from '@agentlink/nat';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRegistry, connectRedis, type RedisConnection } from '../src/index.js';
import { startTestRedis, type TestRedis } from './redis-server.js';
import { entry, registryStoreConformance } from './store-conformance.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

// Two connections with one prefix: two instances sharing the store.
registryStoreConformance('Redis', async () => {
  const prefix = `t${randomUUID()}:`;
  const [a, b] = await Promise.all([connectRedis(redis.url), connectRedis(redis.url)]);
  return {
    store: new RedisRegistry(a, { prefix }),
    twin: new RedisRegistry(b, { prefix }),
    close: async () => {
      await a.close();
      await b.close();
    },
  };
});

describe('RedisRegistry', () => {
  const LIMITS = { maxRegistrations: 100, maxRegistrationsPerIp: 100 };
  let connection: RedisConnection;
  beforeAll(async () => {
    connection = await connectRedis(redis.url);
  });
  afterAll(async () => {
    await connection?.close();
  });

  it("stores the record's expiry as its key's TTL", async () => {
    const prefix = `t${randomUUID()}:`;
    const store = new RedisRegistry(connection, { prefix });
    const me = Identity.generate();
    const stored = entry(me, { expiresAt: Date.now() + 45_000 });
    await store.put(stored, LIMITS);
    expect(await connection.command<number>(['PEXPIRETIME', `${prefix}rec:${me.id}`])).toBe(stored.record.expiresAt);
  });

  it('verifies again on read: a record written into Redis without the agent\'s key is never served', async () => {
    const prefix = `t${randomUUID()}:`;
    const forged: string[] = [];
    const store = new RedisRegistry(connection, { prefix, onForged: (id) => forged.push(id) });
    const victim = Identity.generate();
    const attacker = Identity.generate();
    const real = entry(victim);
    await store.put(real, LIMITS);
    // Someone with access to Redis swaps in a record of theirs, or bytes changed under the signature.
    const theirs = signRecord(attacker, { ...real.record, agentId: attacker.id });
    await connection.command(['HSET', `${prefix}rec:${victim.id}`, 'rec', Buffer.from(theirs.record), 'sig', Buffer.from(theirs.signature)]);
    expect(await store.get(victim.id)).toBeUndefined();
    const tampered = Buffer.from(real.signed.record);
    tampered[tampered.length - 2]! ^= 1;
    await connection.command(['HSET', `${prefix}rec:${victim.id}`, 'rec', tampered, 'sig', Buffer.from(real.signed.signature)]);
    expect(await store.get(victim.id)).toBeUndefined();
    expect(forged).toEqual([victim.id, victim.id]);
  });

  it('a record an instance from before per-/64 counting wrote (counted under its IP, no client kept) moves to its /64 when next registered', async () => {
    const prefix = `t${randomUUID()}:`;
    const store = new RedisRegistry(connection, { prefix });
    const limits = { maxRegistrations: 100, maxRegistrationsPerIp: 2 };
    const old = Identity.generate();
    const written = entry(old, { seq: 1 }, '2001:db8:1:2::1');
    // As the old script left it: the hash without `grp`, the agent in the zset of its address.
    const score = String(written.record.expiresAt);
    await connection.command(['HSET', `${prefix}rec:${old.id}`, 'seq', '1', 'ip', written.ip, 'rec', Buffer.from(written.signed.record), 'sig', Buffer.from(written.signed.signature), 'inst', '']);
    await connection.command(['ZADD', `${prefix}agents`, score, old.id]);
    await connection.command(['ZADD', `${prefix}ip:${written.ip}`, score, old.id]);
    // Its heartbeat reaches a new instance: it leaves its address's zset for its /64's, counted once.
    expect(await store.put(entry(old, { seq: 2 }, '2001:db8:1:2::1'), limits)).toEqual({ stored: true, isNew: false });
    expect(await connection.command<number>(['ZCARD', `${prefix}ip:2001:db8:1:2::1`])).toBe(0);
    expect(await store.countByIp('2001:db8:1:2::9')).toBe(1);
    // So the /64 has one place left, not two.
    expect(await store.put(entry(Identity.generate(), {}, '2001:db8:1:2::2'), limits)).toMatchObject({ stored: true });
    expect(await store.put(entry(Identity.generate(), {}, '2001:db8:1:2::3'), limits)).toEqual({ stored: false, reason: 'per-ip' });
  });

  it('after a restart of the server (empty, scripts forgotten) it stores again, and fails fast while the server is away', async () => {
    const prefix = `t${randomUUID()}:`;
    const own = await connectRedis(redis.url);
    try {
      const store = new RedisRegistry(own, { prefix });
      const me = Identity.generate();
      await store.put(entry(me, { seq: 1 }), LIMITS);
      await redis.kill();
      await expect(store.put(entry(me, { seq: 2 }), LIMITS)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      await redis.start();
      for (let i = 0; i < 100 && !own.ready; i++) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await store.get(me.id)).toBeUndefined(); // no persistence: the registry refills from heartbeats
      expect(await store.put(entry(me, { seq: 3 }), LIMITS)).toEqual({ stored: true, isNew: true });
    } finally {
      await own.close();
    }
  });
});
