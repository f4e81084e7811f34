import { EventEmitter, once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError, createAgent, type Agent } from '@agentlink/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection, stalledAt, within } from './assertions.js';
import { loadFactory, type ConformanceTarget } from './target.js';

/** Duplex handlers; `events` reports the handler side: 'read' (count), 'produced' (count), 'ended' (reason). */
function installDuplexHandlers(agent: Agent, events: EventEmitter): void {
  agent.handleDuplex('echo', async function* (incoming) {
    for await (const item of incoming) yield item;
  });
  // Reads nothing until told to, then reads everything: the caller's sends must stall meanwhile.
  agent.handleDuplex('slow-reader', async function* (incoming, ctx) {
    try {
      await once(events, 'start-reading', { signal: ctx.signal });
      let read = 0;
      for await (const _ of incoming) events.emit('read', ++read);
      yield read;
    } finally {
      events.emit('ended', ctx.signal.reason);
    }
  });
  agent.handleDuplex('firehose', async function* (_incoming, ctx) {
    let produced = 0;
    try {
      for (;;) {
        events.emit('produced', ++produced);
        yield Buffer.alloc(64 * 1024, produced % 251);
      }
    } finally {
      events.emit('ended', ctx.signal.reason);
    }
  });
  agent.handleDuplex('until-cancelled', async function* (incoming, ctx) {
    try {
      for await (const item of incoming) yield item;
    } catch (error) {
      events.emit('incoming-failed', error);
    } finally {
      events.emit('ended', ctx.signal.reason);
    }
  });
  agent.handleDuplex('interrupt', async function* (incoming) {
    for await (const item of incoming) {
      if (item === 'stop') throw new AgentError('CANCELLED', 'handler interrupted: user said stop');
      yield item;
    }
  });
  agent.handleDuplex('fail-after-three', async function* (incoming) {
    let n = 0;
    for await (const item of incoming) {
      yield item;
      if (++n === 3) throw new Error('boom mid-stream');
    }
  });
}

/** Bidirectional calls: what every channel must carry both ways, with backpressure and cancellation. */
export function runDuplexCases(target: ConformanceTarget): void {
  describe(`conformance: ${target.name}: duplex`, () => {
    let server: Agent;
    let client: Agent;
    let address: string;
    const events = new EventEmitter();

    beforeAll(async () => {
      const factory = await loadFactory(target);
      server = await createAgent({ channels: [factory(target.listenOptions)] });
      installDuplexHandlers(server, events);
      client = await createAgent({ channels: [factory(target.dialOptions ?? {})] });
      address = server.addresses[0]!;
    });

    afterAll(async () => {
      await client?.close();
      await server?.close();
    });

    it('echoes values and a 1 MiB binary item, in order, and ends when the caller ends', async () => {
      const call = client.duplex<unknown, unknown>(address, 'echo');
      const big = randomBytes(1024 * 1024);
      const reading = (async () => {
        const seen: unknown[] = [];
        for await (const item of call) seen.push(item);
        return seen;
      })();
      await call.send({ text: 'héllo 🌍', n: 42 });
      await call.send(big);
      await call.send('last');
      await call.end();
      const seen = await reading;
      expect(seen).toHaveLength(3);
      expect(seen[0]).toEqual({ text: 'héllo 🌍', n: 42 });
      expect(Buffer.from(seen[1] as Uint8Array).equals(big)).toBe(true);
      expect(seen[2]).toBe('last');
    });

    it('interleaves send and receive: 100 ping-pongs over one call', async () => {
      const call = client.duplex<number, number>(address, 'echo');
      const replies = call[Symbol.asyncIterator]();
      for (let i = 0; i < 100; i++) {
        await call.send(i);
        const reply = await replies.next();
        expect(reply.value).toBe(i);
      }
      await call.end();
      expect((await replies.next()).done).toBe(true);
    });

    it("a handler that does not read stalls the caller's send; reading resumes it", async () => {
      const itemBytes = 64 * 1024;
      const ended = once(events, 'ended');
      const call = client.duplex<Uint8Array, number>(address, 'slow-reader');
      let accepted = 0;
      let stop = false;
      const sending = (async () => {
        while (!stop) {
          await call.send(Buffer.alloc(itemBytes, accepted % 251));
          accepted++;
        }
        await call.end();
      })();
      const afterPause = await stalledAt(() => accepted);
      // The transport's window and buffers, plus the handler's read-ahead (8 items).
      const bound = Math.ceil((target.maxStreamBufferBytes ?? 4 * 1024 * 1024) / itemBytes) + 8 + 4;
      expect(accepted).toBeLessThanOrEqual(bound);
      const readSome = new Promise<void>((resolve) => {
        const onRead = (n: number): void => {
          if (n < afterPause + 20) return;
          events.off('read', onRead);
          resolve();
        };
        events.on('read', onRead);
      });
      events.emit('start-reading');
      await within(readSome, 10_000, 'the handler reading on');
      stop = true;
      await sending;
      const totals: number[] = [];
      for await (const n of call) totals.push(n);
      expect(totals).toEqual([accepted]);
      await within(ended, 5000, "the handler's finally");
    });

    it("a caller that does not read stalls the handler's yield: bytes in flight stay bounded", async () => {
      let produced = 0;
      const onProduced = (n: number): void => void (produced = n);
      events.on('produced', onProduced);
      const ended = once(events, 'ended');
      try {
        const call = client.duplex<never, Uint8Array>(address, 'firehose');
        const iterator = call[Symbol.asyncIterator]();
        expect(((await iterator.next()).value as Uint8Array).length).toBe(64 * 1024);
        await stalledAt(() => produced);
        const bound = Math.ceil((target.maxStreamBufferBytes ?? 4 * 1024 * 1024) / (64 * 1024)) + 8 + 4;
        expect(produced).toBeLessThanOrEqual(bound);
        for (let i = 0; i < 20; i++) await iterator.next();
        expect(produced).toBeGreaterThan(20);
        await iterator.return?.();
        const [reason] = (await within(ended, 5000, "the handler's finally")) as [AgentError];
        expect(reason.code).toBe('CANCELLED');
      } finally {
        events.off('produced', onProduced);
      }
    });

    it("the caller's abort reaches the handler with its reason text", async () => {
      const failed = once(events, 'incoming-failed');
      const ended = once(events, 'ended');
      const call = client.duplex(address, 'until-cancelled');
      const replies = call[Symbol.asyncIterator]();
      await call.send('hello');
      expect((await replies.next()).value).toBe('hello');
      call.abort('the user changed the subject');
      const [error] = (await within(failed, 5000, 'the handler seeing the cancel')) as [AgentError];
      expect(error).toMatchObject({ code: 'CANCELLED', message: 'the user changed the subject' });
      const [reason] = (await within(ended, 5000, "the handler's finally")) as [AgentError];
      expect(reason.message).toBe('the user changed the subject');
      expect((await rejection(replies.next())).message).toBe('the user changed the subject');
    });

    it("the handler's cancel reaches the caller with its reason text, and fails later sends", async () => {
      const call = client.duplex(address, 'interrupt');
      const replies = call[Symbol.asyncIterator]();
      await call.send('go');
      expect((await replies.next()).value).toBe('go');
      await call.send('stop');
      const error = await rejection(replies.next());
      expect(error).toMatchObject({ code: 'CANCELLED', message: 'handler interrupted: user said stop', remote: true });
      expect((await rejection(call.send('more'))).code).toBe('CANCELLED');
    });

    it('a deadline ends the call on both sides with DEADLINE_EXCEEDED', async () => {
      const ended = once(events, 'ended');
      const call = client.duplex(address, 'until-cancelled', { timeoutMs: 300 });
      await call.send('one');
      const error = await rejection(
        (async () => {
          for await (const _ of call);
        })(),
      );
      expect(error.code).toBe('DEADLINE_EXCEEDED');
      const [reason] = (await within(ended, 5000, "the handler's finally")) as [AgentError];
      expect(reason.code).toBe('DEADLINE_EXCEEDED');
    });

    it("a handler error mid-stream reaches the caller after the items before it", async () => {
      const call = client.duplex<number, number>(address, 'fail-after-three');
      const seen: number[] = [];
      const reading = (async () => {
        for await (const item of call) seen.push(item);
      })();
      for (let i = 0; i < 3; i++) await call.send(i);
      const error = await rejection(reading);
      expect(seen).toEqual([0, 1, 2]);
      expect(error).toMatchObject({ code: 'HANDLER_ERROR', message: 'boom mid-stream', remote: true });
      expect((await rejection(call.send(3))).code).toBe('HANDLER_ERROR');
    });

    it('every finished duplex call frees its stream on both sides', async () => {
      const caller = await createAgent({ channels: [(await loadFactory(target))(target.dialOptions ?? {})] });
      try {
        const done = caller.duplex(address, 'echo');
        await done.send(1);
        await done.end();
        for await (const _ of done);
        const broken = caller.duplex(address, 'fail-after-three');
        for (let i = 0; i < 3; i++) await broken.send(i);
        await rejection(
          (async () => {
            for await (const _ of broken);
          })(),
        );
        const left = caller.duplex(address, 'echo');
        await left.send(1);
        for await (const _ of left) break;
        const [channel] = caller.channels(server.id);
        const serverSide = () => server.channels(caller.id).reduce((n, c) => n + c.activeStreams, 0);
        for (let i = 0; i < 40 && (channel!.activeStreams > 0 || serverSide() > 0); i++) await sleep(25);
        expect(channel!.activeStreams).toBe(0);
        expect(serverSide()).toBe(0);
      } finally {
        await caller.close();
      }
    });
  });
}
