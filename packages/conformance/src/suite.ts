import { once, type EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError, Identity, createAgent, type Agent } from '@agentlink/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstLine, spawnScript } from './child-process.js';
import { describeCrossedDialCases } from './crossed-dial-cases.js';
import { describeRetiredChannelCases } from './retired-channel-cases.js';
import { describeFailureCases } from './failure-cases.js';
import { describeFirstTokenCases } from './first-token-cases.js';
import { installConformanceHandlers } from './handlers.js';
import { runDuplexCases } from './duplex-cases.js';
import { rejection, stalledAt, within } from './assertions.js';
import { loadFactory, type ConformanceTarget, type TransportFactory } from './target.js';

/**
 * The behaviour every agentlink channel must have. A channel package calls this from one test file with its
 * target; the suite starts real agents on loopback (and peer processes it can kill) and talks over real sockets.
 */
export function runConformanceSuite(target: ConformanceTarget): void {
  describe(`conformance: ${target.name}`, () => {
    let factory: TransportFactory;
    let server: Agent;
    let client: Agent;
    let events: EventEmitter;
    let address: string;
    const dialer = (): ReturnType<TransportFactory> => factory(target.dialOptions ?? {});

    beforeAll(async () => {
      factory = await loadFactory(target);
      server = await createAgent({ channels: [factory(target.listenOptions)] });
      events = installConformanceHandlers(server);
      client = await createAgent({ channels: [dialer()] });
      client.handle('echo', (body: unknown) => body);
      address = server.addresses[0]!;
    });

    afterAll(async () => {
      await client?.close();
      await server?.close();
    });

    it('echoes nested, unicode and binary values unchanged', async () => {
      const body = { text: 'héllo 🌍', n: 42, big: 2 ** 40, f: 1.5, list: [1, null, true], bytes: new Uint8Array([0, 1, 255]) };
      const reply = await client.send<typeof body>(address, 'echo', body);
      expect(reply.text).toBe(body.text);
      expect(reply.big).toBe(body.big);
      expect(reply.list).toEqual(body.list);
      expect(Buffer.from(reply.bytes)).toEqual(Buffer.from([0, 1, 255]));
    });

    it('moves a 1 MiB binary body both ways intact', async () => {
      const body = randomBytes(1024 * 1024);
      const reply = await client.send<Uint8Array>(address, 'echo', body);
      expect(Buffer.from(reply).equals(body)).toBe(true);
    });

    it('streams 1,000 tokens in order', async () => {
      const tokens: string[] = [];
      for await (const token of client.stream<string>(address, 'tokens', { count: 1000 })) tokens.push(token);
      expect(tokens).toEqual(Array.from({ length: 1000 }, (_, i) => `token-${i}`));
    });

    it("cancels the remote generator when the caller breaks out: the producer's finally runs", async () => {
      const finished = once(events, 'finally');
      const seen: string[] = [];
      // No delay: the generator never looks at ctx.signal, so only the cancel can stop it.
      for await (const token of client.stream<string>(address, 'tokens', { count: 1_000_000 })) {
        seen.push(token);
        if (seen.length === 5) break;
      }
      const [method, reason] = await within(finished, 2000, "the producer's finally");
      expect(method).toBe('tokens');
      expect((reason as AgentError).code).toBe('CANCELLED');
    });

    it('cancels the remote generator when the caller aborts its signal', async () => {
      const finished = once(events, 'finally');
      const controller = new AbortController();
      const consume = (async () => {
        for await (const token of client.stream<string>(address, 'tokens', { count: 1_000_000, delayMs: 1 }, { signal: controller.signal })) {
          if (token === 'token-3') controller.abort();
        }
      })();
      expect((await rejection(consume)).code).toBe('CANCELLED');
      const [, reason] = await within(finished, 2000, "the producer's finally");
      expect((reason as AgentError).code).toBe('CANCELLED');
    });

    it('after an abort the caller sees no further item, and the handler sees the cancel', async () => {
      const finished = once(events, 'finally');
      const controller = new AbortController();
      let afterAbort = 0;
      const consume = (async () => {
        // No delay: items pile up in the caller's buffers faster than the loop takes them.
        for await (const token of client.stream<string>(address, 'tokens', { count: 1_000_000 }, { signal: controller.signal })) {
          if (controller.signal.aborted) afterAbort++;
          if (token === 'token-100') controller.abort(new AgentError('CANCELLED', 'the user pressed stop'));
        }
      })();
      const error = await rejection(consume);
      expect(error.code).toBe('CANCELLED');
      expect(afterAbort).toBe(0);
      const [, reason] = await within(finished, 2000, "the producer's finally");
      expect((reason as AgentError).code).toBe('CANCELLED');
      // The caller's words reach the handler on every channel (QUIC: the cancel frame is delivered, not reset away).
      expect((reason as AgentError).message).toBe('the user pressed stop');
    });

    it('a passed deadline gives DEADLINE_EXCEEDED to the caller and to the handler', async () => {
      const aborted = once(events, 'aborted');
      const error = await rejection(client.send(address, 'wait-for-abort', null, { timeoutMs: 200 }));
      expect(error.code).toBe('DEADLINE_EXCEEDED');
      const [reason] = await within(aborted, 2000, 'the handler abort');
      expect((reason as AgentError).code).toBe('DEADLINE_EXCEEDED');
    });

    it('passes the caller id, deadline, priority and metadata to the handler', async () => {
      const before = Date.now();
      const context = await client.send<Record<string, unknown>>(address, 'context', null, {
        timeoutMs: 5000,
        priority: 'high',
        metadata: { trace: 'abc' },
      });
      expect(context.peer).toBe(client.id);
      expect(context.method).toBe('context');
      expect(context.priority).toBe('high');
      expect(context.metadata).toEqual({ trace: 'abc' });
      expect(context.deadline as number).toBeGreaterThanOrEqual(before + 4000);
      expect(context.deadline as number).toBeLessThanOrEqual(Date.now() + 5000);
    });

    it("the handler and the caller's channel see addresses as ip:port, an IPv6 one as [v6]:port", async () => {
      const v4 = await client.send<{ remoteAddress: string }>(address, 'context', null);
      expect(v4.remoteAddress).toMatch(/^127\.0\.0\.1:\d+$/);
      // ws and HTTP/2 wrote `::1:port` until 2026-11-24 (QUIC `[::1]:port`): a per-IP key read the port as part of it.
      const v6server = await createAgent({ channels: [factory({ ...target.listenOptions, host: '::1' })] });
      installConformanceHandlers(v6server);
      const v6client = await createAgent({ channels: [dialer()] });
      try {
        const v6 = await v6client.send<{ remoteAddress: string }>(v6server.addresses[0]!, 'context', null);
        expect(v6.remoteAddress).toMatch(/^\[::1\]:\d+$/);
        expect(v6client.channels().map((channel) => channel.remoteAddress)).toEqual([expect.stringMatching(/^\[::1\]:\d+$/)]);
      } finally {
        await v6client.close();
        await v6server.close();
      }
    });

    it('a throwing handler gives HANDLER_ERROR with its message', async () => {
      const error = await rejection(client.send(address, 'throw', 'the model is on fire'));
      expect(error.code).toBe('HANDLER_ERROR');
      expect(error.message).toBe('the model is on fire');
      expect(error.remote).toBe(true);
    });

    it('an inbound interceptor that throws fails that call with HANDLER_ERROR, and the channel serves the next', async () => {
      let calls = 0;
      const guarded = await createAgent({
        channels: [factory(target.listenOptions)],
        inboundInterceptors: [
          (next) => (call, handler) => {
            if (calls++ === 0) throw new Error('interceptor bug');
            next(call, handler);
          },
        ],
      });
      guarded.handle('echo', (body: unknown) => body);
      try {
        // Thrown where the transport hands over the stream, it must not reach (and break) the transport's reader.
        const error = await rejection(client.send(guarded.addresses[0]!, 'echo', 1, { timeoutMs: 10_000 }));
        expect([error.code, error.message]).toEqual(['HANDLER_ERROR', 'interceptor bug']);
        expect(await client.send(guarded.addresses[0]!, 'echo', 2, { timeoutMs: 10_000 })).toBe(2);
      } finally {
        await guarded.close();
      }
    });

    it("a handler's AgentError code crosses the wire", async () => {
      const error = await rejection(client.send(address, 'throw-code', { code: 'RESOURCE_EXHAUSTED', message: 'quota' }));
      expect(error.code).toBe('RESOURCE_EXHAUSTED');
      expect(error.message).toBe('quota');
    });

    it('an unknown method fails with NO_HANDLER, not at its deadline', async () => {
      // NO_HANDLER (not DEADLINE_EXCEEDED) with a 120 s deadline: the peer answered, the call did not wait it out.
      const error = await rejection(client.send(address, 'no-such-method', null, { timeoutMs: 120_000 }));
      expect(error.code).toBe('NO_HANDLER');
    });

    it('a frame over the receiver limit gives FRAME_TOO_LARGE and the channel survives', async () => {
      const small = await createAgent({ channels: [factory(target.listenOptions)], maxFrameSize: 64 * 1024 });
      installConformanceHandlers(small);
      try {
        const smallAddress = small.addresses[0]!;
        expect(await client.send(smallAddress, 'echo', 'warm-up')).toBe('warm-up');
        const [channel] = client.channels(small.id);
        const error = await rejection(client.send(smallAddress, 'echo', randomBytes(256 * 1024)));
        expect(error.code).toBe('FRAME_TOO_LARGE');
        expect(await client.send(smallAddress, 'echo', 'still here')).toBe('still here');
        expect(client.channels(small.id)).toHaveLength(1);
        expect(client.channels(small.id)[0] === channel).toBe(true); // the same channel (identity; no deep diff)
      } finally {
        await small.close();
      }
    });

    it('a body over the sender limit fails locally with FRAME_TOO_LARGE', async () => {
      const tight = await createAgent({ channels: [dialer()], maxFrameSize: 1024 });
      try {
        const error = await rejection(tight.send(address, 'echo', randomBytes(4096)));
        expect(error.code).toBe('FRAME_TOO_LARGE');
        expect(await tight.send(address, 'echo', 'ok')).toBe('ok');
      } finally {
        await tight.close();
      }
    });

    it('garbage bytes on the listening port are refused without disturbing service', async () => {
      const { hostname, port } = new URL(address.slice(address.indexOf('@') + 1));
      const host = hostname.replace(/^\[|\]$/g, '');
      if (target.socket === 'tcp') {
        for (let i = 0; i < 5; i++) {
          const socket = connect(Number(port), host);
          socket.on('error', () => undefined);
          socket.resume(); // read what the server answers (an alert, then EOF), or 'close' never comes
          await once(socket, 'connect');
          socket.write(randomBytes(64 * 1024));
          // Random bytes can look like the start of a TLS record; servers give a handshake 5 s at most.
          await within(once(socket, 'close'), 8000, 'the server closing a garbage connection');
        }
      } else {
        const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
        for (let i = 0; i < 200; i++) socket.send(randomBytes(1 + (i % 1200)), Number(port), host);
        await sleep(100);
        socket.close();
      }
      expect(await client.send(address, 'echo', 'after garbage')).toBe('after garbage');
    });

    it('garbage inside a stream resets that stream with PROTOCOL_ERROR; the channel survives', async () => {
      await client.send(address, 'echo', 'warm-up');
      const [channel] = client.channels(server.id);
      const stream = await channel!.openStream();
      const frame = Buffer.from([0, 0, 0, 5, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1]); // 0xc1 is never valid msgpack
      await stream.write(frame);
      const error = await rejection(within(stream.read(), 5000, 'the stream reset'));
      expect(error.code).toBe('PROTOCOL_ERROR');
      expect(await client.send(address, 'echo', 'fine')).toBe('fine');
      expect(client.channels(server.id)).toHaveLength(1);
      expect(client.channels(server.id)[0] === channel).toBe(true);
    });

    it('a peer proving another key than the one dialled is refused with UNAUTHENTICATED', async () => {
      const impostor = Identity.generate().id;
      const url = address.slice(address.indexOf('@') + 1);
      const error = await rejection(client.send(`${impostor}@${url}`, 'echo', 'secret'));
      expect(error.code).toBe('UNAUTHENTICATED');
      expect(client.channels(impostor)).toEqual([]);
    });

    it('a slow consumer stalls the producer: bytes in flight stay bounded', async () => {
      const itemBytes = 64 * 1024;
      let produced = 0;
      const onProduced = (n: number): void => void (produced = n);
      events.on('produced', onProduced);
      const finished = once(events, 'finally');
      try {
        const iterator = client.stream<Uint8Array>(address, 'firehose', { itemBytes })[Symbol.asyncIterator]();
        const first = await iterator.next();
        expect((first.value as Uint8Array).length).toBe(itemBytes);
        await stalledAt(() => produced); // stalled, not merely slow (a loaded machine may take a while to fill the window)
        const bound = Math.ceil((target.maxStreamBufferBytes ?? 4 * 1024 * 1024) / itemBytes) + 4;
        expect(produced).toBeLessThanOrEqual(bound);
        for (let i = 0; i < 20; i++) await iterator.next(); // reading resumes the producer
        expect(produced).toBeGreaterThan(20);
        await iterator.return?.();
        await within(finished, 2000, "the producer's finally");
      } finally {
        events.off('produced', onProduced);
      }
    });

    it('serves 100 concurrent calls', async () => {
      const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => client.send<number>(address, 'echo', i)));
      expect(replies).toEqual(Array.from({ length: 100 }, (_, i) => i));
    });

    it('every finished call frees its stream on both sides: unary, stream, error, refused, cancelled and pings', async () => {
      const caller = await createAgent({ channels: [dialer()] });
      try {
        await caller.send(address, 'echo', 1);
        // A ping is what every health check sends (both ends, every 30 s): one left behind per check was a leak.
        expect(await caller.ping(address)).toBeGreaterThanOrEqual(0);
        await caller.ping(address);
        for await (const _ of caller.stream(address, 'tokens', { count: 3 }));
        for await (const _ of caller.stream(address, 'tokens', { count: 100, delayMs: 5 })) break;
        await rejection(caller.send(address, 'throw', 'boom'));
        await rejection(caller.send(address, 'no-such-method'));
        const [channel] = caller.channels(server.id);
        const serverSide = () => server.channels(caller.id).reduce((n, c) => n + c.activeStreams, 0);
        // Polled until released, however long a loaded machine takes (the test's timeout bounds it), not for 1 s.
        while (channel!.activeStreams > 0 || serverSide() > 0) await sleep(25);
        expect(channel!.activeStreams).toBe(0);
        expect(serverSide()).toBe(0);
      } finally {
        await caller.close();
      }
    });

    it('the connection gate refuses a stranger with PERMISSION_DENIED before any handler runs, and admits a friend', async () => {
      const friend = Identity.generate();
      let ran = 0;
      const gated = await createAgent({ channels: [factory(target.listenOptions)], allowPeers: [friend.id] });
      gated.handle('work', () => ++ran);
      const stranger = await createAgent({ channels: [dialer()] });
      const welcome = await createAgent({ identity: friend, channels: [dialer()] });
      try {
        const error = await rejection(stranger.send(gated.addresses[0]!, 'work', undefined, { timeoutMs: 5000 }));
        expect(error.code).toBe('PERMISSION_DENIED');
        expect(ran).toBe(0);
        expect(gated.stats().refusals['authorization:gate']).toBeGreaterThanOrEqual(1);
        expect(await welcome.send(gated.addresses[0]!, 'work')).toBe(1);
      } finally {
        await Promise.all([stranger.close(), welcome.close()]);
        await gated.close();
      }
    });

    it('a channel closed with PERMISSION_DENIED fails the call in flight on the other side with PERMISSION_DENIED', async () => {
      const serving = await createAgent({ channels: [factory(target.listenOptions)] });
      const calling = await createAgent({ channels: [dialer()] });
      try {
        let arrived!: () => void;
        const reachedHandler = new Promise<void>((resolve) => (arrived = resolve));
        serving.handle('hold', () => {
          arrived();
          return new Promise(() => undefined); // ended by the channel's close
        });
        const inFlight = rejection(calling.send(serving.addresses[0]!, 'hold', null, { timeoutMs: 120_000 }));
        await reachedHandler; // the call is in flight at the server
        const [channel] = serving.channels(calling.id);
        await channel!.close(new AgentError('PERMISSION_DENIED', 'not allowed here'));
        expect((await inFlight).code).toBe('PERMISSION_DENIED');
      } finally {
        await calling.close();
        await serving.close();
      }
    });

    it('the serving agent can call the caller back over the same channel', async () => {
      expect(await client.send(address, 'call-back', 'ping-pong')).toBe('ping-pong');
      expect(server.channels(client.id)).toHaveLength(1);
    });

    it('leaks no handles: a process that called and closed exits on its own', async () => {
      const child = spawnScript('clean-exit-process', target);
      expect(await firstLine(child)).toBe('closed');
      const [code] = (await within(once(child, 'exit'), 5000, 'the process exiting by itself')) as [number];
      expect(code).toBe(0);
    });

    describeFailureCases(target);
    describeCrossedDialCases(target);
    describeRetiredChannelCases(target);
    describeFirstTokenCases(target);
  });
  runDuplexCases(target);
}
