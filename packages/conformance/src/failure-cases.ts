import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import { AgentError, Identity, createAgent, retry, saveIdentity, type Agent } from '@agentlink/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPeerProcess } from './child-process.js';
import { installConformanceHandlers } from './handlers.js';
import { rejection } from './assertions.js';
import { loadFactory, type ConformanceTarget, type TransportFactory } from './target.js';

/**
 * A deadline far beyond any channel's failure detection (the targets configure short idle timeouts where the
 * channel has one: QUIC 2 s): a call given it can only end early by the channel noticing the dead peer, and then
 * with UNAVAILABLE — DEADLINE_EXCEEDED would mean detection did not happen.
 */
const UNREACHABLE_DEADLINE_MS = 120_000;
const MUX_WINDOW_4_MIB = 4 * 1024 * 1024;

/**
 * How every channel fails and recovers: cancellation seen alike by both sides, a peer process killed mid-call,
 * a peer restarted on its address with its key, and (channels over core's mux) two sides with different mux
 * windows. Registered by `runConformanceSuite`, inside its describe.
 */
export function describeFailureCases(target: ConformanceTarget): void {
  describe('failures and recovery', () => {
    let factory: TransportFactory;
    let keyDir: string;
    const children: ChildProcess[] = [];
    const agents: Agent[] = [];
    const dialer = (): ReturnType<TransportFactory> => factory(target.dialOptions ?? {});

    beforeAll(async () => {
      factory = await loadFactory(target);
      keyDir = await mkdtemp(join(tmpdir(), 'agentlink-conformance-'));
    });

    afterEach(async () => {
      for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await Promise.all(agents.splice(0).map((agent) => agent.close()));
    });

    afterAll(async () => {
      await rm(keyDir, { recursive: true, force: true });
    });

    async function agent(options: Parameters<typeof createAgent>[0]): Promise<Agent> {
      const made = await createAgent(options);
      agents.push(made);
      return made;
    }

    async function peer(spec: { keyFile?: string; port?: number } = {}): Promise<{ child: ChildProcess; address: string }> {
      const started = await startPeerProcess({ module: target.module, factory: target.factory, listenOptions: target.listenOptions, ...spec });
      children.push(started.child);
      return started;
    }

    async function kill(child: ChildProcess): Promise<void> {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }

    it('after the caller breaks out, its iterator yields nothing more and the handler sees the cancel with its text', async () => {
      const server = await agent({ channels: [factory(target.listenOptions)] });
      const events = installConformanceHandlers(server);
      const client = await agent({ channels: [dialer()] });
      const finished = once(events, 'finally');
      // No delay: the caller's buffers hold items the loop has not taken when it stops.
      const iterator = client.stream<string>(server.addresses[0]!, 'tokens', { count: 1_000_000 })[Symbol.asyncIterator]();
      for (let i = 0; i < 100; i++) expect((await iterator.next()).value).toBe(`token-${i}`);
      expect(await iterator.return(undefined)).toEqual({ done: true, value: undefined });
      expect(await iterator.next()).toEqual({ done: true, value: undefined });
      const [method, reason] = await finished;
      expect(method).toBe('tokens');
      expect((reason as AgentError).code).toBe('CANCELLED');
      expect((reason as AgentError).message).toBe('caller stopped reading the stream');
    });

    it('a call in flight to a peer process killed mid-stream fails UNAVAILABLE, long before its deadline', async () => {
      const { child, address } = await peer();
      const caller = await agent({ channels: [dialer()] });
      let received = 0;
      const consume = (async () => {
        for await (const _ of caller.stream(address, 'tokens', { count: 1_000_000, delayMs: 10 }, { timeoutMs: UNREACHABLE_DEADLINE_MS })) {
          if (++received === 5) child.kill('SIGKILL');
        }
      })();
      const error = await rejection(consume);
      // UNAVAILABLE, not DEADLINE_EXCEEDED: the channel's own detection (TCP's end; QUIC's idle timeout, or on Linux
      // the dead port's ICMP port unreachable) ended it.
      expect(error.code).toBe('UNAVAILABLE');
      expect(received).toBeGreaterThanOrEqual(5);
    });

    it('a unary call waiting on a killed peer fails UNAVAILABLE, and so does the channel', async () => {
      const { child, address } = await peer();
      const caller = await agent({ channels: [dialer()] });
      expect(await caller.send(address, 'echo', 'alive')).toBe('alive');
      const [channel] = caller.channels();
      // Whether the request reached the handler before the kill or not, the call has a live stream on a
      // channel whose peer is gone: only the channel noticing can end it before the deadline.
      const waiting = rejection(caller.send(address, 'wait-for-abort', null, { timeoutMs: UNREACHABLE_DEADLINE_MS }));
      await kill(child);
      expect((await waiting).code).toBe('UNAVAILABLE');
      expect((await channel!.closed).code).toBe('UNAVAILABLE');
    });

    // Agents in a chain (user → orchestrator → model), one hop in a process of its own, killed mid-stream: the
    // failure crosses the other hop as a typed error, and nothing waits for the deadline.
    it('a chain whose model process is killed mid-stream: the user, through the orchestrator, fails UNAVAILABLE', async () => {
      const model = await peer();
      const orchestrator = await agent({ channels: [factory(target.listenOptions)] });
      installConformanceHandlers(orchestrator);
      const user = await agent({ channels: [dialer()] });
      let received = 0;
      const relay = { to: model.address, method: 'tokens', body: { count: 1_000_000, delayMs: 10 } };
      const consume = (async () => {
        for await (const token of user.stream(orchestrator.addresses[0]!, 'relay', relay, { timeoutMs: UNREACHABLE_DEADLINE_MS })) {
          expect(token).toBe(`token-${received}`);
          if (++received === 5) model.child.kill('SIGKILL');
        }
      })();
      expect((await rejection(consume)).code).toBe('UNAVAILABLE');
    });

    it("a chain whose orchestrator process is killed mid-stream: the model's handler stops, the user fails UNAVAILABLE", async () => {
      const model = await agent({ channels: [factory(target.listenOptions)] });
      const events = installConformanceHandlers(model);
      const orchestrator = await peer();
      const user = await agent({ channels: [dialer()] });
      const finished = once(events, 'finally');
      let received = 0;
      const relay = { to: model.addresses[0]!, method: 'tokens', body: { count: 1_000_000, delayMs: 10 } };
      const consume = (async () => {
        for await (const _ of user.stream(orchestrator.address, 'relay', relay, { timeoutMs: UNREACHABLE_DEADLINE_MS })) {
          if (++received === 5) orchestrator.child.kill('SIGKILL');
        }
      })();
      expect((await rejection(consume)).code).toBe('UNAVAILABLE');
      const [method, reason] = await finished; // the model's generator ran its finally: it stopped producing
      expect(method).toBe('tokens');
      expect((reason as AgentError).code).toBe('UNAVAILABLE');
    });

    it('a peer restarted on its address with its key: the same caller\'s next call succeeds within a 1 s deadline', async () => {
      const keyFile = join(keyDir, `${target.name}-restart.key`);
      await saveIdentity(Identity.generate(), keyFile);
      const first = await peer({ keyFile });
      const port = Number(new URL(first.address.slice(first.address.indexOf('@') + 1)).port);
      // The agent's retry interceptor: a call that went out on the dead peer's channel before anything told the
      // caller (QUIC: the restarted peer answers it with a stateless reset) fails UNAVAILABLE and is tried again.
      const caller = await agent({ channels: [dialer()], interceptors: [retry()] });
      expect(await caller.send(first.address, 'echo', 'first life')).toBe('first life');
      await kill(first.child);

      const second = await peer({ keyFile, port });
      expect(second.address).toBe(first.address);
      const reply = await caller.send(first.address, 'echo', 'second life', { timeoutMs: 1000, idempotent: true });
      expect(reply).toBe('second life');
      expect(await caller.send(first.address, 'echo', 'and again', { timeoutMs: 1000 })).toBe('and again');
      expect(caller.channels()).toHaveLength(1);
    });

    if (target.muxOptions) {
      for (const [serverWindow, clientWindow] of [
        [MUX_WINDOW_4_MIB, undefined],
        [undefined, MUX_WINDOW_4_MIB],
      ] as const) {
        const describeWindow = (window: number | undefined): string => (window ? '4 MiB' : 'the default');
        it(`mux windows of ${describeWindow(serverWindow)} (server) and ${describeWindow(clientWindow)} (client): a slow reader gets every item, no PROTOCOL_ERROR`, async () => {
          const withWindow = (options: Record<string, unknown>, window: number | undefined): Record<string, unknown> =>
            window ? { ...options, mux: { window } } : options;
          const server = await agent({ channels: [factory(withWindow(target.listenOptions, serverWindow))] });
          const events = installConformanceHandlers(server);
          const client = await agent({ channels: [factory(withWindow(target.dialOptions ?? {}, clientWindow))] });
          const itemBytes = 64 * 1024;
          const items = (2 * MUX_WINDOW_4_MIB) / itemBytes; // twice the larger window
          const finished = once(events, 'finally');
          let received = 0;
          for await (const item of client.stream<Uint8Array>(server.addresses[0]!, 'firehose', { itemBytes })) {
            received++;
            expect(item.length).toBe(itemBytes);
            expect(item[itemBytes - 1]).toBe(received % 251); // the producer fills item n with n % 251
            if (received === items) break;
            // The reader is slow (a workload, not a wait for anything): the producer fills whatever window it
            // believes the reader has; a sender that believed 4 MiB against 256 KiB would overrun it.
            if (received % 8 === 0) await sleep(5);
          }
          expect(received).toBe(items);
          const [, reason] = await finished;
          expect((reason as AgentError).code).toBe('CANCELLED');
        });
      }
    }
  });
}
