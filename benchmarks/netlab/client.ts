/**
 * The measuring side of a lab run, started inside namespace `a` by run.ts: agentlink agents (as applications
 * use them) calling agentbench's server in namespace `b` across the impaired path. Reads jobs as JSON from argv,
 * prints one JSON result per line (and `{"event":"measuring"}` as each bulk download starts).
 *   bulk:  `streams` concurrent downloads on one channel for `seconds`: aggregate Mbit/s.
 *   burst: `streams` concurrent streams of `tokens` 16-byte tokens each, as fast as the server yields: p50/p95
 *          of each stream's time from request to last token, over `rounds` rounds.
 */
import { createAgent, type Agent, type AgentOptions } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { percentiles } from '../../packages/agentbench/src/stats.js';
import type { ServerAddresses } from '../../packages/agentbench/src/subjects/subject.js';

/**
 * `ws-fixed`: ws with the mux's window auto-tuning off (256 KiB per stream, as before it), for comparison.
 * `relay`: through a rendezvous's relay (relay-peer.ts in namespace b; the caller may only use the relay).
 */
export type Channel = 'quic' | 'http2' | 'ws' | 'ws-fixed' | 'relay';
/** Where relay-peer.ts serves: its rendezvous and the relayed agent. */
export interface RelayAddress {
  rendezvous: string;
  id: string;
}
export type Job =
  | { kind: 'bulk'; channel: Channel; streams: number; seconds: number }
  | { kind: 'burst'; channel: Channel; streams: number; tokens: number; rounds: number };
export type JobResult =
  | { kind: 'bulk'; channel: Channel; streams: number; seconds: number; bytes: number; mbitPerSecond: number }
  | { kind: 'burst'; channel: Channel; streams: number; tokens: number; p50Ms: number; p95Ms: number; n: number };

const TOKEN_BYTES = 16;
/** The downloading agent's QUIC stream window, when a run compares it (`--engines name=file+NETLAB_QUIC_STREAM_WINDOW=bytes`). */
const quicStreamWindow = process.env['NETLAB_QUIC_STREAM_WINDOW'] === undefined ? undefined : Number(process.env['NETLAB_QUIC_STREAM_WINDOW']);

/** The address to call and the calling agent's channels (and plugins) for a channel. */
type AgentSetup = Pick<AgentOptions, 'channels' | 'plugins'>;
function target(addresses: ServerAddresses, relay: RelayAddress | undefined, channel: Channel): { address: string; setup: () => AgentSetup } {
  if (channel === 'quic') return { address: addresses.agentlinkQuic!, setup: () => ({ channels: [quic(quicStreamWindow === undefined ? {} : { streamWindow: quicStreamWindow })] }) };
  if (channel === 'http2') return { address: addresses.agentlinkHttp2, setup: () => ({ channels: [http2()] }) };
  if (channel === 'ws-fixed') return { address: addresses.agentlinkWs, setup: () => ({ channels: [webSocket({ mux: { maxWindow: 256 * 1024 } })] }) };
  if (channel === 'relay') {
    if (relay === undefined) throw new Error('channel relay: no relay-peer address');
    return {
      address: relay.id,
      setup: () => {
        const q = quic({ port: 0, host: '0.0.0.0' }); // reach's STUN and punching need a listening socket, unused here
        return { channels: [q, webSocket()], plugins: [reach({ rendezvous: relay.rendezvous, quic: q, paths: ['relay'] })] };
      },
    };
  }
  return { address: addresses.agentlinkWs, setup: () => ({ channels: [webSocket()] }) };
}

async function withAgent<T>(setup: AgentSetup, use: (agent: Agent) => Promise<T>): Promise<T> {
  const agent = await createAgent({ ...setup, maxFrameSize: 64 * 1024 * 1024, defaultTimeoutMs: 300_000, connectTimeoutMs: 30_000 });
  try {
    return await use(agent);
  } finally {
    await agent.close();
  }
}

async function bulk(address: string, transport: AgentSetup, streams: number, seconds: number): Promise<number> {
  return withAgent(transport, async (agent) => {
    await agent.ping(address, { timeoutMs: 30_000 }); // the channel is up before the clock starts
    process.stdout.write(`${JSON.stringify({ event: 'measuring' })}\n`); // run.ts --fairness starts its TCP flow now
    let bytes = 0;
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), seconds * 1000);
    await Promise.all(
      Array.from({ length: streams }, async () => {
        try {
          for await (const chunk of agent.stream<Uint8Array>(address, 'download', { total: 2 ** 40, chunk: 64 * 1024 }, { signal: stop.signal })) {
            if (!stop.signal.aborted) bytes += chunk.length;
          }
        } catch (error) {
          if (!stop.signal.aborted) throw error;
        }
      }),
    );
    clearTimeout(timer);
    return bytes;
  });
}

async function burst(address: string, transport: AgentSetup, streams: number, tokens: number, rounds: number): Promise<number[]> {
  return withAgent(transport, async (agent) => {
    await agent.ping(address, { timeoutMs: 30_000 });
    const samples: number[] = [];
    for (let round = 0; round < rounds; round++) {
      await Promise.all(
        Array.from({ length: streams }, async () => {
          const started = performance.now();
          let received = 0;
          for await (const chunk of agent.stream<Uint8Array>(address, 'download', { total: tokens * TOKEN_BYTES, chunk: TOKEN_BYTES })) received += chunk.length;
          if (received !== tokens * TOKEN_BYTES) throw new Error(`burst moved ${received} of ${tokens * TOKEN_BYTES} bytes`);
          samples.push(performance.now() - started);
        }),
      );
    }
    return samples;
  });
}

const { addresses, relay, jobs } = JSON.parse(process.argv[2]!) as { addresses: ServerAddresses; relay?: RelayAddress; jobs: Job[] };
for (const job of jobs) {
  const { address, setup } = target(addresses, relay, job.channel);
  let result: JobResult;
  if (job.kind === 'bulk') {
    const bytes = await bulk(address, setup(), job.streams, job.seconds);
    result = { ...job, bytes, mbitPerSecond: (bytes * 8) / 1e6 / job.seconds };
  } else {
    const samples = await burst(address, setup(), job.streams, job.tokens, job.rounds);
    const p = percentiles(samples);
    result = { ...job, p50Ms: p.p50, p95Ms: p.p95, n: p.n };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
