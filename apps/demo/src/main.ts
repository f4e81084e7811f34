/**
 * The demo: starts the LLM agent in a second process, streams an answer from it over a mutually
 * authenticated wss:// channel, and prints time-to-first-token and tokens/s.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createAgent } from '@agentlink/core';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import type { Token } from './fake-llm.js';

const prompt = process.argv.slice(2).join(' ') || 'How do two agents behind different networks talk?';

const server = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', fileURLToPath(new URL('./llm-agent.ts', import.meta.url))], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const [firstChunk] = (await once(server.stdout, 'data')) as [Buffer];
const llmAddresses = firstChunk.toString('utf8').trim().split('\n')[0]!.split(' ');
const llmAddress = llmAddresses[0]!;

const agent = await createAgent({ channels: [quic(), webSocket()], peers: llmAddresses });
console.log(`this agent:   ${agent.id}`);
console.log(`llm agent:    ${llmAddress}`);
console.log(`prompt:       ${prompt}\n`);

const started = performance.now();
let firstTokenAt = 0;
let tokens = 0;
for await (const token of agent.stream<Token>(llmAddress, 'llm.generate', { prompt }, { timeoutMs: 30_000 })) {
  if (tokens === 0) firstTokenAt = performance.now();
  tokens++;
  process.stdout.write(token.text);
}
const ended = performance.now();
const rate = tokens > 1 ? ((tokens - 1) * 1000) / (ended - firstTokenAt) : 0;
console.log('\n');
console.log(`channel:              ${agent.channels()[0]?.kind} (TLS 1.3, keys pinned both ways)`);
console.log(`time to first token:  ${(firstTokenAt - started).toFixed(1)} ms (includes connecting; the model waits 40 ms)`);
console.log(`tokens:               ${tokens} in ${(ended - started).toFixed(0)} ms`);
console.log(`tokens/s:             ${rate.toFixed(1)} (the model paces 8 ms/token)`);
console.log(`round trip now:       ${(await agent.ping(llmAddress)).toFixed(3)} ms`);

await agent.close();
server.stdin.end();
await once(server, 'exit');
