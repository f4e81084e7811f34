/**
 * The caller's per-item read path of a token stream alone, in one process with no transport: a stream that hands
 * over 16 KiB chunks of 680 16-byte binary items (what a burst's batches carry), core's `FramedStream` reading
 * them, a copy of the call's read loop (`CallAttempt.receiveReplies`: take what a chunk holds, else wait for the
 * next; hand each item to the handler and wait while it holds), `StreamItems` (the read-ahead) and the
 * `ItemIterator` a `for await` drains. Prints wall and CPU ns per item per round; nothing else runs, so the figure
 * is that path's cost (docs/performance-log.md, "The caller's cost per streamed item").
 *
 *   pnpm --filter @agentlink/benchmarks read-path [--chunks 2] [--calls 1000] [--rounds 7] [--core DIR]
 *
 * `--core DIR`: another copy of packages/core/src, to compare two versions of the path by running them in turn. Keep
 * it inside the workspace (tsx compiles files outside it with other settings: the same code read ~35% slower from
 * /tmp), e.g. `mkdir -p benchmarks/.builds/rp/main && git archive main packages/core/src | tar -x --strip-components=3
 * -C benchmarks/.builds/rp/main` (benchmarks/.builds is not committed).
 */
import { parseArgs } from 'node:util';
import type { FramedStream as FramedStreamType } from '../../packages/core/src/wire/framed-stream.js';
import type { StreamItems as StreamItemsType } from '../../packages/core/src/agent/call-results.js';
import type * as Codec from '../../packages/core/src/wire/codec.js';
import type { ChannelStream } from '../../packages/core/src/channel.js';
import { coreSourceUrl, DEFAULT_CORE_SOURCES } from './core-sources.js';
import { median } from './median.js';

const { values } = parseArgs({
  options: {
    chunks: { type: 'string', default: '2' },
    calls: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '7' },
    // core's sources to measure (a copy of packages/core/src from another commit, for A/B runs in turn)
    core: { type: 'string', default: DEFAULT_CORE_SOURCES },
  },
});
const coreUrl = (file: string): string => coreSourceUrl(values.core, file);
const { FramedStream } = (await import(coreUrl('wire/framed-stream.ts'))) as { FramedStream: typeof FramedStreamType };
const { encodeFrame, encodeSmallItem } = (await import(coreUrl('wire/codec.ts'))) as typeof Codec;
const { StreamItems } = (await import(coreUrl('agent/call-results.ts'))) as { StreamItems: typeof StreamItemsType };
const ITEMS_PER_CHUNK = 680;
const CHUNKS = Number(values.chunks);

const chunk = Buffer.alloc(ITEMS_PER_CHUNK * 24);
for (let i = 0, at = 0; i < ITEMS_PER_CHUNK; i++) at = encodeSmallItem(Buffer.alloc(16, i), chunk, at);
const endFrame = encodeFrame({ type: 'end' });

/** A stream whose reads give CHUNKS chunks of items, then the stream's `end` message, then its end. */
function burstStream(): ChannelStream {
  let reads = 0;
  return {
    read: async () => (reads < CHUNKS ? (reads++, chunk) : reads++ === CHUNKS ? endFrame : undefined),
    write: async () => undefined,
    end: async () => undefined,
    reset: () => undefined,
  };
}

async function readReplies(framed: FramedStreamType, handler: StreamItemsType<unknown>): Promise<void> {
  for (;;) {
    const message = framed.takeReady() ?? (await framed.receive());
    if (message?.type !== 'item') return handler.onEnd();
    const held = handler.onItem(message.body, framed.lastFrameBytes);
    if (held) await held;
  }
}

async function oneCall(): Promise<number> {
  const items = new StreamItems<unknown>();
  void readReplies(new FramedStream(burstStream(), 16 * 1024 * 1024), items);
  let count = 0;
  for await (const item of items.iterate(() => undefined)) if (item) count++;
  return count;
}

const calls = Number(values.calls);
for (let i = 0; i < 200; i++) await oneCall(); // warm-up
const wall: number[] = [];
const cpu: number[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  const cpuStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  let items = 0;
  for (let i = 0; i < calls; i++) items += await oneCall();
  const used = process.cpuUsage(cpuStart);
  wall.push(Number(process.hrtime.bigint() - start) / items);
  cpu.push(((used.user + used.system) * 1000) / items);
}
console.log(`${CHUNKS} chunks × ${ITEMS_PER_CHUNK} items per call, ${calls} calls per round; ns per item, median of ${wall.length} rounds [min–max]`);
console.log(`wall ${median(wall).toFixed(0)} [${Math.min(...wall).toFixed(0)}–${Math.max(...wall).toFixed(0)}], CPU ${median(cpu).toFixed(0)} [${Math.min(...cpu).toFixed(0)}–${Math.max(...cpu).toFixed(0)}]`);
