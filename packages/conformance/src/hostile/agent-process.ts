/**
 * An agent in its own process, so its memory can be measured honestly: the hostile-peer suite attacks it (as a
 * server) or has it read slowly (as a caller). argv[2]: JSON { module, factory, listenOptions, dialOptions?,
 * agentOptions? }. Prints one JSON line { address } when ready, then answers requests on stdin, one JSON line
 * each ({ id, op, ...args } → { id, result } or { id, error }). Exits when stdin ends. Run with --expose-gc.
 */
import { createInterface } from 'node:readline';
import { createAgent, type AgentOptions } from '@agentlink/core';
import { installConformanceHandlers } from '../handlers.js';
import { loadFactory } from '../target.js';
import { SlowReader } from './slow-reader.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as {
  module: string;
  factory: string;
  listenOptions: Record<string, unknown>;
  dialOptions?: Record<string, unknown>;
  agentOptions?: Partial<AgentOptions>;
};
const factory = await loadFactory(spec);
const agent = await createAgent({ ...spec.agentOptions, channels: [factory(spec.listenOptions)] });
const events = installConformanceHandlers(agent);
let produced = 0;
events.on('produced', () => void produced++);

/** Peak RSS since the last `reset-peak`, sampled often: lifetime maxRSS would include start-up (tsx compiling). */
let peakRss = process.memoryUsage.rss();
const sampler = setInterval(() => void (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 10);
sampler.unref();

const reader = new SlowReader(agent);

function stats(): Record<string, unknown> {
  const memory = process.memoryUsage();
  peakRss = Math.max(peakRss, memory.rss);
  const pool = agent.stats();
  const peers = new Set(pool.channels.map((c) => c.peer));
  const channels = [...peers].flatMap((peer) => agent.channels(peer));
  const activeStreams = channels.reduce((n, channel) => n + channel.activeStreams, 0);
  // Which channels hold them, for a failure's report: the attacker's or the well-behaved caller's.
  const streamsByChannel = channels.filter((c) => c.activeStreams > 0).map((c) => `${c.peer.toString().slice(0, 8)}@${c.remoteAddress}: ${c.activeStreams}`);
  return {
    rss: memory.rss,
    peakRss,
    heapUsed: memory.heapUsed,
    external: memory.external,
    arrayBuffers: memory.arrayBuffers,
    channels: pool.channels.length,
    activeStreams,
    streamsByChannel,
    refusals: pool.refusals,
    produced,
    slowReader: reader.stats(),
    // A prototype-key message must never reach Object.prototype.
    prototypeClean: Object.keys(Object.prototype).length === 0 && ({} as Record<string, unknown>)['polluted'] === undefined,
  };
}

const operations: Record<string, (args: Record<string, unknown>) => unknown> = {
  stats: () => stats(),
  'reset-peak': () => {
    peakRss = process.memoryUsage.rss();
    return stats();
  },
  gc: () => {
    const collect = (globalThis as { gc?: () => void }).gc;
    collect?.();
    collect?.();
    return stats();
  },
  'slow-read': (args) => reader.start(args['address'] as string, args['streams'] as number, args['itemBytes'] as number),
  'stop-reading': () => reader.stop(),
};

process.stdout.write(`${JSON.stringify({ address: agent.addresses[0] })}\n`);
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const { id, op, ...args } = JSON.parse(line) as { id: number; op: string } & Record<string, unknown>;
  const run = operations[op];
  Promise.resolve()
    .then(() => (run ? run(args) : Promise.reject(new Error(`unknown op ${op}`))))
    .then(
      (result) => process.stdout.write(`${JSON.stringify({ id, result })}\n`),
      (error: Error) => process.stdout.write(`${JSON.stringify({ id, error: `${error.name}: ${error.message}` })}\n`),
    );
});
// Exit when the parent goes away, so a failed test never leaves an agent behind.
lines.on('close', () => void agent.close().then(() => process.exit(0)));
