/**
 * Measures what a caller sees when a QUIC peer dies (SIGKILL) and comes back on the same address and key:
 *  - detection: how long a call in flight to the killed peer takes to fail, and with which code;
 *  - restart: from the restarted peer printing its address, how long until the caller's calls succeed again
 *    (the caller calls in a loop, each call with a 2 s deadline, as soon as the previous one ended).
 * Usage: node --conditions=source --import tsx packages/quic/scripts/measure-restart.ts [runs=5]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentError, createAgent, Identity, saveIdentity } from '@agentlink/core';
import { quic } from '../src/index.js';

const peerScript = fileURLToPath(new URL('../test/fixtures/restartable-peer.ts', import.meta.url));

async function startPeer(keyFile: string, port: number): Promise<{ child: ChildProcess; address: string; readyAt: number }> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', peerScript, keyFile, String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, address: (JSON.parse(line.toString()) as { address: string }).address, readyAt: performance.now() };
}

const codeOf = (error: unknown): string => (error instanceof AgentError ? error.code : String(error));

async function run(dir: string, index: number): Promise<{ detectMs: number; detectCode: string; reachMs: number; failures: string[] }> {
  const keyFile = join(dir, `agent-${index}.key`);
  await saveIdentity(Identity.generate(), keyFile);
  const first = await startPeer(keyFile, 0);
  const port = Number(new URL(first.address.split('@')[1]!).port);
  const caller = await createAgent({ channels: [quic({})] });
  try {
    if ((await caller.send(first.address, 'echo', 'alive')) !== 'alive') throw new Error('no echo');
    // Detection: a call in flight when the peer dies.
    const inFlight = caller.send(first.address, 'hang', null, { timeoutMs: 60_000 }).then(
      () => 'OK',
      (error: unknown) => codeOf(error),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    first.child.kill('SIGKILL');
    const killedAt = performance.now();
    const detectCode = await inFlight;
    const detectMs = performance.now() - killedAt;
    // Restart: a second life of the peer, killed and brought back at once, while the caller's channel to it
    // still looks open.
    const second = await startPeer(keyFile, port);
    if ((await caller.send(first.address, 'echo', 'alive')) !== 'alive') throw new Error('no echo from the second peer');
    second.child.kill('SIGKILL');
    const third = await startPeer(keyFile, port);
    const failures: string[] = [];
    let reachMs = Number.NaN;
    while (performance.now() - third.readyAt < 30_000) {
      const started = performance.now();
      try {
        await caller.send(first.address, 'echo', 'again', { timeoutMs: 2000 });
        reachMs = performance.now() - third.readyAt;
        break;
      } catch (error) {
        failures.push(`${codeOf(error)}@${Math.round(started - third.readyAt)}ms`);
      }
    }
    third.child.stdin!.end();
    await once(third.child, 'exit');
    return { detectMs, detectCode, reachMs, failures };
  } finally {
    await caller.close();
  }
}

const runs = Number(process.argv[2] ?? 5);
const dir = await mkdtemp(join(tmpdir(), 'agentlink-restart-'));
try {
  for (let i = 0; i < runs; i++) {
    const r = await run(dir, i);
    console.log(
      `run ${i + 1}: in-flight call to a killed peer failed after ${(r.detectMs / 1000).toFixed(2)} s (${r.detectCode}); ` +
        `restarted peer reachable after ${Math.round(r.reachMs)} ms${r.failures.length ? `, failed first: ${r.failures.join(', ')}` : ''}`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
