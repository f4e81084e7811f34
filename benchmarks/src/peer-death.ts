/**
 * What a caller sees when its peer's process dies (SIGKILL) and comes back, per channel, default settings:
 *   node --conditions=source --import tsx benchmarks/src/peer-death.ts [runs=5] [kinds=ws,http2,quic]
 * - detection: a stream call in flight (an item every 10 ms, a 60 s deadline) when the peer is killed: the
 *   time from the kill until the call fails, and its code;
 * - restart: the peer (alive again, with a channel from the caller open to it) is killed and at once started
 *   again on the same port with the same key; from the moment it prints its address, the caller calls `echo`
 *   in a loop (each call with a 2 s deadline, no retry interceptor) until one succeeds: the time until then,
 *   and how many calls failed first (a call already on the dead channel may fail UNAVAILABLE).
 * Runs go kind by kind within each repeat (interleaved), and the median and range of each are printed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentError, createAgent, Identity, saveIdentity, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { median } from './median.js';

type Kind = 'ws' | 'http2' | 'quic';
const peerScript = fileURLToPath(new URL('./peer-death-peer.ts', import.meta.url));

interface Peer {
  child: ChildProcess;
  address: string;
  readyAt: number;
}

async function startPeer(kind: Kind, keyFile: string, port: number): Promise<Peer> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', peerScript, kind, keyFile, String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, address: (JSON.parse(line.toString()) as { address: string }).address, readyAt: performance.now() };
}

async function kill(peer: Peer): Promise<number> {
  const exited = once(peer.child, 'exit');
  peer.child.kill('SIGKILL');
  const killedAt = performance.now();
  await exited;
  return killedAt;
}

function dialer(kind: Kind): Transport {
  return kind === 'ws' ? webSocket() : kind === 'http2' ? http2() : quic();
}

const codeOf = (error: unknown): string => (error instanceof AgentError ? error.code : String(error));

interface Run {
  detectMs: number;
  detectCode: string;
  reachMs: number;
  failedFirst: string[];
}

async function run(kind: Kind, keyFile: string): Promise<Run> {
  await saveIdentity(Identity.generate(), keyFile);
  const first = await startPeer(kind, keyFile, 0);
  const port = Number(new URL(first.address.slice(first.address.indexOf('@') + 1)).port);
  const caller = await createAgent({ channels: [dialer(kind)] });
  const peers: Peer[] = [first];
  try {
    // Detection.
    let killedAt = 0;
    let items = 0;
    const detected = (async () => {
      for await (const _ of caller.stream(first.address, 'tokens', null, { timeoutMs: 60_000 })) {
        if (++items === 5) killedAt = await kill(first);
      }
      return 'OK';
    })().catch(codeOf);
    const detectCode = await detected;
    const detectMs = performance.now() - killedAt;
    // Restart: a second life with an open channel from the caller, killed and started again at once.
    const second = await startPeer(kind, keyFile, port);
    peers.push(second);
    if ((await caller.send(first.address, 'echo', 'alive', { timeoutMs: 10_000 })) !== 'alive') throw new Error('no echo');
    await kill(second);
    const third = await startPeer(kind, keyFile, port);
    peers.push(third);
    const failedFirst: string[] = [];
    let reachMs = Number.NaN;
    while (performance.now() - third.readyAt < 30_000) {
      try {
        await caller.send(first.address, 'echo', 'again', { timeoutMs: 2000 });
        reachMs = performance.now() - third.readyAt;
        break;
      } catch (error) {
        failedFirst.push(codeOf(error));
      }
    }
    return { detectMs, detectCode, reachMs, failedFirst };
  } finally {
    await caller.close();
    for (const peer of peers) if (peer.child.exitCode === null && peer.child.signalCode === null) peer.child.kill('SIGKILL');
  }
}

const runs = Number(process.argv[2] ?? 5);
const kinds = (process.argv[3] ?? 'ws,http2,quic').split(',') as Kind[];
const dir = await mkdtemp(join(tmpdir(), 'agentlink-peer-death-'));
const results = new Map<Kind, Run[]>(kinds.map((k) => [k, []]));
try {
  for (let i = 0; i < runs; i++) {
    for (const kind of kinds) {
      const r = await run(kind, join(dir, `${kind}-${i}.key`));
      results.get(kind)!.push(r);
      console.log(
        `${kind} run ${i + 1}: detection ${r.detectMs.toFixed(0)} ms (${r.detectCode}); restart reachable after ${r.reachMs.toFixed(0)} ms` +
          (r.failedFirst.length ? ` (failed first: ${r.failedFirst.join(', ')})` : ''),
      );
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
const summary = (values: number[]): string =>
  `median ${median(values).toFixed(0)} ms, range ${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)} ms`;
console.log(`\n${runs} runs per channel, node ${process.version}`);
for (const [kind, rs] of results) {
  const codes = [...new Set(rs.map((r) => r.detectCode))].join('/');
  const failed = rs.reduce((n, r) => n + r.failedFirst.length, 0);
  console.log(`${kind.padEnd(5)} dead peer → ${codes}: ${summary(rs.map((r) => r.detectMs))}`);
  console.log(`${''.padEnd(5)} restarted peer reachable: ${summary(rs.map((r) => r.reachMs))}; calls failed first: ${failed} in ${rs.length} runs`);
}
