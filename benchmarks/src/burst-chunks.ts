/**
 * Where the caller's time goes in agentbench's 1,000-token burst, in agentbench's conditions: its serving process
 * (packages/agentbench/dist/peer-process.js, so the workspace's build), 600 1 KB echoes before each subject's
 * five bursts per round, agentlink http2 and ws taking turns. Prints, per channel, the medians of when the caller
 * had tokens #0, #1, #2, every 100th and the last and when its loop ended (µs after #0) and the per-token figure
 * agentbench reports; then, for the last rounds, each chunk the channel handed core (µs after #0 : bytes @ the
 * item the caller was at), and when the caller had #683 and #684 (the items around the 16 KiB batch's end).
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks burst-chunks [rounds = 15] [http2|ws]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createAgent } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { webSocket } from '@agentlink/ws';
import { ChunkQueue } from '@agentlink/core/transport';

let chunkLog: string[] | undefined;
let chunkT0 = 0;
let itemNo = 0;
const push = ChunkQueue.prototype.push;
ChunkQueue.prototype.push = function (this: ChunkQueue, chunk: Uint8Array) {
  if (chunkLog) chunkLog.push(`${((performance.now() - chunkT0) * 1000).toFixed(0)}:${chunk.length}@${itemNo}`);
  return push.call(this, chunk);
};
const logs: Record<string, string[]> = { http2: [], ws: [] };

const root = fileURLToPath(new URL('../../', import.meta.url));
const server = spawn(process.execPath, ['--expose-gc', `${root}packages/agentbench/dist/peer-process.js`, '127.0.0.1'], { stdio: ['pipe', 'pipe', 'inherit'] });
const [line] = (await once(server.stdout!, 'data')) as [Buffer];
const addresses = JSON.parse(line.toString());
const TOKENS = 1000;
const subjects = [
  { name: 'http2', agent: await createAgent({ channels: [http2()], maxFrameSize: 64 << 20, defaultTimeoutMs: 120_000 }), address: addresses.agentlinkHttp2 },
  { name: 'ws', agent: await createAgent({ channels: [webSocket()], maxFrameSize: 64 << 20, defaultTimeoutMs: 120_000 }), address: addresses.agentlinkWs },
];
const only = process.argv[3];
if (only) subjects.splice(0, subjects.length, ...subjects.filter((s) => s.name === only));
console.error(`server pid ${server.pid}`);
if (process.env.PROBE_WAIT) await new Promise((r) => setTimeout(r, Number(process.env.PROBE_WAIT)));
const rows: Record<string, number[][]> = { http2: [], ws: [] };
const payload = Buffer.alloc(1024, 5);
const rounds = Number(process.argv[2] ?? 15);
for (let round = 0; round <= rounds; round++) {
  for (const s of round % 2 ? subjects : [...subjects].reverse()) {
    for (let i = 0; i < 600; i++) await s.agent.send(s.address, 'echo', payload);
    for (let b = 0; b < 5; b++) {
      const t0 = performance.now();
      const marks: number[] = [];
      let n = 0;
      chunkLog = [];
      for await (const _ of s.agent.stream(s.address, 'download', { total: TOKENS * 16, chunk: 16, delayMs: 0 })) {
        if (n < 3 || n % 100 === 0 || n === TOKENS - 1) marks.push(performance.now() - t0);
        if (n === 0) chunkT0 = performance.now();
        if (n === 683 || n === 684) chunkLog!.push(`#${n}:${((performance.now() - chunkT0) * 1000).toFixed(0)}`);
        itemNo = n + 1;
        n++;
      }
      marks.push(performance.now() - t0);
      if (round > 0) rows[s.name]!.push(marks);
      if (round > rounds - 2) logs[s.name]!.push(chunkLog.join(' '));
      chunkLog = undefined;
    }
  }
}
const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1]!;
for (const [name, r] of Object.entries(rows).filter(([, r]) => r.length > 0)) {
  const L = r[0]!.length;
  const cols = Array.from({ length: L }, (_, k) => med(r.map((m) => (m[k]! - m[0]!) * 1000)).toFixed(0));
  const per = med(r.map((m) => ((m[L - 1]! - m[0]!) * 1000) / (TOKENS - 1))).toFixed(3);
  console.log(`${name}: ttft ${med(r.map((m) => m[0]!)).toFixed(3)} ms; µs after #0 at #0,#1,#2,#100..#900,#999,end: ${cols.join(' ')}; per token ${per}`);
}
for (const [name, l] of Object.entries(logs)) for (const x of l) console.log(`${name} chunks (µs after #0:bytes) ${x}`);
for (const s of subjects) await s.agent.close();
server.stdin!.end();
process.exit(0);
