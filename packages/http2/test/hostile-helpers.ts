import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { diagnosticChannels, type Agent, type Refusal } from '@agentlink/core';
import { MIN_IDLE_MS_BEFORE_EVICTION } from '@agentlink/core/transport';
import { expect, vi } from 'vitest';

/** Fails with how to get a tool the test needs (.ci/run installs it on CI). */
export function requireTool(tool: string, probe: string[] = ['--version']): void {
  const result = spawnSync(tool, probe, { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    throw new Error(`this test needs \`${tool}\` on PATH (Debian: apt-get install ${tool}; .ci/run installs it)`);
  }
}

export interface PemFiles {
  dir: string;
  keyPath: string;
  certPath: string;
  key: string;
  cert: string;
  remove(): void;
}

/** A throwaway self-signed certificate made by openssl, as any stranger can: Ed25519, or an EC P-256 key. */
export function strangerCertificate(type: 'ed25519' | 'ec' = 'ed25519'): PemFiles {
  requireTool('openssl', ['version']);
  const dir = mkdtempSync(join(tmpdir(), 'agentlink-stranger-'));
  const keyPath = join(dir, 'k.pem');
  const certPath = join(dir, 'c.pem');
  const keyArgs = type === 'ed25519' ? ['-newkey', 'ed25519'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
  execFileSync('openssl', ['req', '-x509', ...keyArgs, '-nodes', '-subj', '/CN=x', '-days', '1', '-keyout', keyPath, '-out', certPath], { stdio: 'ignore' });
  return {
    dir,
    keyPath,
    certPath,
    key: readFileSync(keyPath, 'utf8'),
    cert: readFileSync(certPath, 'utf8'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Resolves with the next refusal an agent in this process publishes that matches. */
export function nextRefusal(matches: (refusal: Refusal) => boolean): Promise<Refusal> {
  return new Promise((resolve) => {
    const onRefusal = (message: unknown): void => {
      const refusal = message as Refusal;
      if (!matches(refusal)) return;
      diagnosticChannels.peerRefused.unsubscribe(onRefusal);
      resolve(refusal);
    };
    diagnosticChannels.peerRefused.subscribe(onRefusal);
  });
}

/** A raw TCP connection; resolves once connected. */
export async function tcp(port: number, localAddress?: string): Promise<Socket> {
  const socket = netConnect({ host: '127.0.0.1', port, ...(localAddress === undefined ? {} : { localAddress }) });
  socket.on('error', () => undefined);
  socket.resume(); // reads to the end, so a close by the server is seen
  await once(socket, 'connect');
  return socket;
}

export interface AgentProcess {
  child: ChildProcess;
  address: string;
  stats(): Promise<{ rss: number; heapUsed: number; arrayBuffers: number; cpuMs: number; buffered: number; refusals: Record<string, number> }>;
  stop(): Promise<void>;
}

/** The fixture agent (test/fixtures/agent-process.ts) in a child process. */
export async function startAgentProcess(options: object = { port: 0 }): Promise<AgentProcess> {
  const script = new URL('./fixtures/agent-process.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, ['--expose-gc', '--conditions=source', '--import', 'tsx', script, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: Interface = createInterface({ input: child.stdout! });
  const queue: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => {
    const wake = waiting.shift();
    if (wake) wake(line);
    else queue.push(line);
  });
  const exited = once(child, 'exit').then(([code, signal]) => {
    throw new Error(`the agent process exited (${String(code ?? signal)})`);
  });
  exited.catch(() => undefined);
  const nextLine = (): Promise<string> => {
    const line = queue.shift();
    if (line !== undefined) return Promise.resolve(line);
    return Promise.race([new Promise<string>((resolve) => waiting.push(resolve)), exited]);
  };
  const { address } = JSON.parse(await nextLine()) as { address: string };
  return {
    child,
    address,
    async stats() {
      child.stdin!.write('stats\n');
      return JSON.parse(await nextLine());
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = once(child, 'exit');
      child.stdin!.end();
      await gone;
    },
  };
}

/**
 * One case for every TCP listener (ws, http2): with `maxConnectionsPerIp: 1` and a peer connected, a second
 * socket from the same IP is closed before TLS and reported as `max-connections-per-ip`; once the peer has left,
 * its place is free for the next one. `agent()` makes an agent of the channel under test (listening when given a
 * port), with `limits` on its listener.
 */
export async function expectPerIpPlaceFreed(
  kind: Refusal['kind'],
  agent: (options?: { port?: number; limits?: object }) => Promise<Agent>,
  limits: object,
  portOf: (address: string) => number,
): Promise<void> {
  const server = await agent({ port: 0, limits });
  const client = await agent();
  expect(await client.send(server.addresses[0]!, 'echo', 1)).toBe(1);
  const reported = nextRefusal((r) => r.kind === kind && r.stage === 'connection');
  const extra = await tcp(portOf(server.addresses[0]!));
  await once(extra, 'close');
  expect((await reported).reason).toBe('max-connections-per-ip');

  const [held] = server.channels(client.id);
  await client.close();
  await held!.closed;
  await new Promise((resolve) => setImmediate(resolve));
  const next = await agent();
  expect(await next.send(server.addresses[0]!, 'echo', 2)).toBe(2);
}

/** What {@link expectIdleEviction} needs of a channel's tests. */
export interface EvictionHarness {
  kind: Refusal['kind'];
  /** An agent of the channel under test (listening when given a port), with `echo` handled. */
  agent(options?: Record<string, unknown>): Promise<Agent>;
  /** Options of an agent whose connections come from `ip` (a loopback address). */
  from(ip: string): Record<string, unknown>;
  /** Moves the listener's clock on (fake timers where it runs in JavaScript). */
  advance(ms: number): Promise<void> | void;
  /** How long a connection must be idle before it may be evicted. */
  minIdleMs: number;
}

/**
 * One case for every channel: a listener held full (maxConnections 4, 3 per IP) by three connections from
 * 127.0.0.2 and one from 127.0.0.1 takes a second peer from 127.0.0.1 by evicting the 127.0.0.2 connection idle
 * the longest — never the one with a call in flight, which completes — and tells the evicted peer why
 * (RESOURCE_EXHAUSTED). The evicted group's redial is refused: it is no longer the group holding the most.
 */
export async function expectIdleEviction(harness: EvictionHarness): Promise<void> {
  const { kind, agent, from } = harness;
  const server = await agent({ port: 0, limits: { maxConnections: 4, maxConnectionsPerIp: 3 } });
  let releaseHeld!: (value: string) => void;
  const held = new Promise<string>((resolve) => (releaseHeld = resolve));
  server.handle('hold', () => held);
  const address = server.addresses[0]!;
  const attackers: Agent[] = [];
  for (let i = 0; i < 3; i++) {
    attackers.push(await agent(from('127.0.0.2')));
    expect(await attackers[i]!.send(address, 'echo', i)).toBe(i);
  }
  // The first attacker connection, idle the longest, has a call in flight: it is never evicted.
  const inFlight = attackers[0]!.send(address, 'hold', null);
  const honest = await agent(from('127.0.0.1'));
  expect(await honest.send(address, 'echo', 'first')).toBe('first');
  const victimChannel = attackers[1]!.channels(server.id)[0]!;
  await harness.advance(harness.minIdleMs);

  const evicted = nextRefusal((r) => r.kind === kind && r.reason === 'evicted');
  const newcomer = await agent(from('127.0.0.1'));
  expect(await newcomer.send(address, 'echo', 'second')).toBe('second');
  const refusal = await evicted;
  expect(refusal).toMatchObject({ stage: 'connection', code: 'RESOURCE_EXHAUSTED' });
  expect(refusal.remoteAddress).toMatch(/^127\.0\.0\.2:/);
  // Every channel names the evicted peer (its key was proved), not only its address.
  expect(refusal.peer).toBe(attackers[1]!.id);
  // The evicted peer hears why: its pool dials again when it next needs the listener.
  expect((await victimChannel.closed).code).toBe('RESOURCE_EXHAUSTED');
  expect(server.stats().refusals['connection:evicted']).toBe(1);

  releaseHeld('done');
  expect(await inFlight).toBe('done');

  // 2 against 2 now: the evicted group's redial takes nothing back.
  const refused = nextRefusal((r) => r.kind === kind && r.reason === 'max-connections');
  const error = await attackers[1]!.send(address, 'echo', 'again').catch((e: unknown) => e);
  expect((error as { code?: string }).code).toBe('UNAVAILABLE');
  expect((await refused).remoteAddress).toMatch(/^127\.0\.0\.2:/);
  expect(await honest.send(address, 'echo', 'still')).toBe('still');
  expect(server.stats().refusals['connection:evicted']).toBe(1);
}

/**
 * {@link expectIdleEviction} for a listener that runs in JavaScript (ws, HTTP/2): the idle ages on vitest's fake
 * `performance` clock, while sockets and their timers stay real; its agents dial from a `localAddress`.
 */
export async function expectIdleEvictionOnFakeClock(kind: Refusal['kind'], agent: EvictionHarness['agent']): Promise<void> {
  vi.useFakeTimers({ toFake: ['performance'] });
  try {
    await expectIdleEviction({
      kind,
      agent,
      from: (ip) => ({ localAddress: ip }),
      advance: (ms) => void vi.advanceTimersByTime(ms),
      minIdleMs: MIN_IDLE_MS_BEFORE_EVICTION,
    });
  } finally {
    vi.useRealTimers();
  }
}
