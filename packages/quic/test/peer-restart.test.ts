import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { AgentError, createAgent, Identity, saveIdentity, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { quic } from '../src/index.js';

const peerScript = fileURLToPath(new URL('./fixtures/restartable-peer.ts', import.meta.url));
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function startPeer(keyFile: string, port: number, idleTimeoutMs: number): Promise<{ child: ChildProcess; address: string }> {
  const args = [peerScript, keyFile, String(port), String(idleTimeoutMs)];
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, address: (JSON.parse(line.toString()) as { address: string }).address };
}

async function keyFile(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agentlink-restart-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'agent.key');
  await saveIdentity(Identity.generate(), file);
  return file;
}

async function caller(idleTimeoutMs: number): Promise<Agent> {
  const agent = await createAgent({ channels: [quic({ idleTimeoutMs })] });
  cleanups.push(() => agent.close());
  return agent;
}

describe('a QUIC peer that dies and comes back', () => {
  it('restarted with its key on its address, it resets the old connection at once: the channel closes and the next call dials anew', async () => {
    const file = await keyFile();
    // A minute of idle timeout on both sides (a connection's is the smaller of the two): within this test only a
    // stateless reset can end the old channel. With the peer's default 10 s, a restart that took longer on a
    // loaded machine (spawning node + tsx) found the channel already closed by the idle timeout.
    const first = await startPeer(file, 0, 60_000);
    const port = Number(new URL(first.address.split('@')[1]!).port);
    const agent = await caller(60_000);
    expect(await agent.send(first.address, 'echo', 'first life')).toBe('first life');
    const [stale] = agent.channels();
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');

    const second = await startPeer(file, port, 60_000);
    expect(second.address).toBe(first.address);
    // The call goes out on the old channel (nothing told the caller yet); the restarted peer answers with a
    // stateless reset, which the caller accepts because the token comes from the same agent key.
    const onStale = await agent.send(first.address, 'echo', 'on the stale channel').then(
      (body) => ({ body }),
      (error: unknown) => ({ error }),
    );
    const reason = await stale!.closed;
    expect(reason.code).toBe('UNAVAILABLE');
    // Or, on Linux, a packet that reached the dead port while the peer was down (an ACK, a keep-alive) drew an
    // ICMP port unreachable first, and the channel closed as gone (native/src/unreachable.rs).
    expect(reason.message).toMatch(process.platform === 'linux' ? /reset|port is unreachable/ : /reset/);
    // Either the reset came before the call took the channel (then the call dialled anew), or the call was on
    // it and failed as a lost connection: never a deadline.
    if ('error' in onStale) expect((onStale.error as AgentError).code).toBe('UNAVAILABLE');
    else expect(onStale.body).toBe('on the stale channel');
    expect(await agent.send(first.address, 'echo', 'second life')).toBe('second life');
    expect(agent.channels()).toHaveLength(1);
    expect(agent.channels()[0]).not.toBe(stale);
  });

  it('a call in flight to a killed peer fails UNAVAILABLE by the idle timeout, counted from the peer\'s last packet (elsewhere than Linux)', async () => {
    const first = await startPeer(await keyFile(), 0, 1000);
    const agent = await caller(1000);
    expect(await agent.send(first.address, 'echo', 'alive')).toBe('alive');
    const [channel] = agent.channels();
    const inFlight = agent.send(first.address, 'hang', null, { timeoutMs: 60_000 }).catch((error: unknown) => error);
    first.child.kill('SIGKILL');
    const error = await inFlight;
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('UNAVAILABLE');
    // On Linux the caller's keep-alive (a third of the idle timeout) draws the dead port's ICMP port unreachable,
    // which closes the channel first (native/src/unreachable.rs); elsewhere only the idle timeout can.
    expect((await channel!.closed).message).toMatch(process.platform === 'linux' ? /port is unreachable/ : /idle timeout/);
  });

  it.runIf(process.platform === 'linux')(
    'a duplex call to a peer killed mid-stream fails UNAVAILABLE at its next item, from the ICMP port unreachable, long before a minute of idle timeout',
    async () => {
      const peer = await startPeer(await keyFile(), 0, 60_000);
      const agent = await caller(60_000);
      // A deadline far beyond the test's own timeout: only the engine's liveness can end this call in time.
      const call = agent.duplex(peer.address, 'listen', { timeoutMs: 3_600_000 });
      const replies = call[Symbol.asyncIterator]();
      await call.send('one');
      expect((await replies.next()).value).toBe('ack');
      const [channel] = agent.channels();
      peer.child.kill('SIGKILL');
      await once(peer.child, 'exit');

      // The item goes to a closed port: the peer's kernel (here ours) answers with ICMP port unreachable. That is
      // only a hint; the engine's probe draws another and no answer comes, so the connection is closed as gone.
      void call.send('two').catch(() => undefined);
      const error = await replies.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(AgentError);
      expect((error as AgentError).code).toBe('UNAVAILABLE');
      expect((error as AgentError).message).toMatch(/port is unreachable/);
      const reason = await channel!.closed;
      expect(reason.code).toBe('UNAVAILABLE');
      expect(reason.message).toMatch(/port is unreachable/);
    },
  );

  it.runIf(process.platform === 'linux')(
    'a receive-only streamed call to a peer killed after its first item fails UNAVAILABLE from the ICMP port unreachable, though the caller sends nothing',
    async () => {
      const peer = await startPeer(await keyFile(), 0, 180_000);
      const agent = await caller(180_000);
      // Three minutes of idle timeout (the caller's keep-alive every minute) and an hour of deadline: the test's own
      // timeout (30 s) ends it first unless the engine probes the silent peer while the caller's read waits
      // (native/src/quiet.rs; with AGENTLINK_QUIC_QUIET_PROBE_MS=0 it does, checked).
      const tokens = agent.stream(peer.address, 'tokens', null, { timeoutMs: 3_600_000 })[Symbol.asyncIterator]();
      expect((await tokens.next()).value).toBe('token 0');
      const [channel] = agent.channels();
      // Our ACK of the item leaves within the ACK delay (25 ms); once it went, nothing of the caller's goes to the
      // peer's port after its death but a probe. (Killed sooner, that ACK draws the ICMP: the fast case.)
      await sleep(250);
      const next = tokens.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      peer.child.kill('SIGKILL');
      await once(peer.child, 'exit');

      const error = await next;
      expect(error).toBeInstanceOf(AgentError);
      expect((error as AgentError).code).toBe('UNAVAILABLE');
      expect((error as AgentError).message).toMatch(/port is unreachable/);
      const reason = await channel!.closed;
      expect(reason.code).toBe('UNAVAILABLE');
      expect(reason.message).toMatch(/port is unreachable/);
    },
  );
});
