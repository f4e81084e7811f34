/**
 * The serving side's per-item path of a token stream alone, in one process with no transport: a handler's
 * `async *` generator yielding 16-byte tokens, a copy of the loop that moves them to the reply (`InboundCall.pump`),
 * and core's `FramedStream.sendItem` batching them, charged to a channel's reply budget as the agent's are, into a
 * stream whose writes the transport takes at once (as node:http2 does below its mark). Prints CPU ns per item; the
 * counterpart of `read-path` (docs/performance-log.md, "HTTP/2 token bursts: the last fraction of a µs per token").
 *
 *   pnpm --filter @agentlink/benchmarks serve-path [--tokens 1000] [--calls 1000] [--rounds 7] [--core DIR]
 *
 * `--core DIR`: another copy of packages/core/src inside the workspace, as for `read-path`.
 */
import { parseArgs } from 'node:util';
import type { FramedStream as FramedStreamType } from '../../packages/core/src/wire/framed-stream.js';
import type { ChannelBudgets as ChannelBudgetsType } from '../../packages/core/src/agent/byte-budget.js';
import type { ChannelStream, Channel } from '../../packages/core/src/channel.js';
import { coreSourceUrl, DEFAULT_CORE_SOURCES } from './core-sources.js';
import { median } from './median.js';

const { values } = parseArgs({
  options: {
    tokens: { type: 'string', default: '1000' },
    calls: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '7' },
    core: { type: 'string', default: DEFAULT_CORE_SOURCES },
  },
});
const coreUrl = (file: string): string => coreSourceUrl(values.core, file);
const { FramedStream } = (await import(coreUrl('wire/framed-stream.ts'))) as { FramedStream: typeof FramedStreamType };
const { WRITTEN } = (await import(coreUrl('wire/written.ts'))) as { WRITTEN: Promise<void> };
const { ChannelBudgets } = (await import(coreUrl('agent/byte-budget.ts'))) as { ChannelBudgets: typeof ChannelBudgetsType };

const TOKENS = Number(values.tokens);
const token = Buffer.alloc(16, 7);
const budgets = new ChannelBudgets(32 << 20, 256 << 20, 'replies the peer does not read', () => undefined);
const channel = {} as Channel;
let written = 0;
const stream: ChannelStream = {
  read: async () => undefined,
  write: (chunk) => ((written += chunk.length), WRITTEN),
  endWith: (chunk) => ((written += chunk.length), WRITTEN),
  end: () => WRITTEN,
  reset: () => undefined,
};

async function* tokens(): AsyncGenerator<Buffer> {
  for (let i = 0; i < TOKENS; i++) yield token;
}

/** InboundCall.pump's loop: each item to the writer; a write that must wait holds the generator. */
async function pump(items: AsyncIterable<unknown>, framed: FramedStreamType): Promise<void> {
  const iterator = items[Symbol.asyncIterator]();
  for (;;) {
    const next = await iterator.next();
    if (next.done) return;
    const held = framed.sendItem(next.value);
    if (held) await held;
  }
}

async function oneCall(): Promise<number> {
  const framed = new FramedStream(stream, 16 * 1024 * 1024, undefined, budgets.for(channel));
  await pump(tokens(), framed);
  await framed.sendLast({ type: 'end' });
  return TOKENS;
}

const calls = Number(values.calls);
for (let i = 0; i < 200; i++) await oneCall(); // warm-up
const cpu: number[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  const cpuStart = process.cpuUsage();
  let items = 0;
  for (let i = 0; i < calls; i++) items += await oneCall();
  const used = process.cpuUsage(cpuStart);
  cpu.push(((used.user + used.system) * 1000) / items);
}
console.log(`${TOKENS} items per call, ${calls} calls per round; CPU ns per item, median of ${cpu.length} rounds [min–max]`);
console.log(`CPU ${median(cpu).toFixed(0)} [${Math.min(...cpu).toFixed(0)}–${Math.max(...cpu).toFixed(0)}] (${written} bytes written)`);
