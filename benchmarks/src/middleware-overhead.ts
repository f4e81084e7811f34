/**
 * What the interceptors cost per call, the agenkit way: a bare call vs each middleware alone vs the full stack,
 * measured in one run.
 *   pnpm build && pnpm --filter @agentlink/benchmarks middleware
 * It measures the built packages (dist), as users run them: from TypeScript source through tsx, esbuild's
 * keepNames helper wraps every function and triples the figures.
 * Two views: the interceptor chain around a terminal that answers at once (the added µs per call, nothing
 * else in the way), and `agent.send` over a real wss channel on loopback (the ratio a user sees).
 */
import { Bench } from 'tinybench';
import {
  AgentError,
  CallMetrics,
  Identity,
  circuitBreaker,
  composeInterceptors,
  createAgent,
  rateLimit,
  retry,
  timeout,
  type CallHandler,
  type CallInfo,
  type Dispatch,
  type Interceptor,
} from '@agentlink/core';
import { webSocket } from '@agentlink/ws';

const peer = Identity.generate().id;

/** The fields interceptors read, as the agent's own call object has them. */
class BenchCall implements CallInfo {
  readonly peer = peer;
  readonly method = 'echo';
  readonly body = 1;
  readonly mode = 'unary' as const;
  readonly priority = 'normal' as const;
  metadata: Readonly<Record<string, string>> = {};
  readonly idempotent = true;
  readonly deadline = Date.now() + 30_000;
  readonly abortReason: AgentError | undefined = undefined;
  get signal(): AbortSignal {
    return new AbortController().signal;
  }
  remainingMs(): number {
    return this.deadline - Date.now();
  }
  setMetadata(key: string, value: string): void {
    this.metadata = { ...this.metadata, [key]: value };
  }
  abort(): void {}
}

/** Answers every call at once, as a peer with zero latency would. */
const instantPeer: Dispatch = (_call, handler) => {
  handler.onStart?.({ abort: () => undefined });
  handler.onResponse?.(1);
  handler.onEnd();
};

function stacks(): Array<[string, Interceptor[]]> {
  const metrics = new CallMetrics();
  return [
    ['bare call', []],
    ['retry', [retry()]],
    ['timeout', [timeout({ ms: 30_000 })]],
    ['circuit breaker', [circuitBreaker()]],
    ['rate limit (never limiting)', [rateLimit({ global: { ratePerSecond: 1e12 }, perPeer: { ratePerSecond: 1e12 } })]],
    ['metrics', [metrics.interceptor]],
    ['full stack', [new CallMetrics().interceptor, retry(), circuitBreaker(), rateLimit({ global: { ratePerSecond: 1e12 } }), timeout({ ms: 30_000 })]],
  ];
}

/** One call through the chain; the instant peer answers synchronously, so no promise is in the measurement. */
function callOnce(dispatch: Dispatch): void {
  let ended = false;
  const handler: CallHandler = {
    onEnd: () => (ended = true),
    onError: (error) => {
      throw error;
    },
  };
  dispatch(new BenchCall(), handler);
  if (!ended) throw new Error('the chain did not end the call synchronously');
}

export async function measureChain(time = 500): Promise<Array<{ stack: string; meanUs: number; addedUs: number; ratio: number }>> {
  const bench = new Bench({ time, warmupTime: 100 });
  for (const [name, interceptors] of stacks()) {
    const dispatch = composeInterceptors(interceptors, instantPeer);
    bench.add(name, () => callOnce(dispatch));
  }
  await bench.run();
  return table(bench);
}

export async function measureOverWebSocket(time = 1000): Promise<Array<{ stack: string; meanUs: number; addedUs: number; ratio: number }>> {
  const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
  server.handle('echo', (n: number) => n);
  const bench = new Bench({ time, warmupTime: 200 });
  const clients = [];
  for (const [name, interceptors] of stacks()) {
    const client = await createAgent({ channels: [webSocket({})], interceptors });
    clients.push(client);
    const address = server.addresses[0]!;
    await client.send(address, 'echo', 1);
    bench.add(name, () => client.send(address, 'echo', 1, { idempotent: true }));
  }
  await bench.run();
  await Promise.all([...clients, server].map((a) => a.close()));
  return table(bench);
}

function table(bench: Bench) {
  const means = bench.tasks.map((t) => ((t.result as { latency?: { mean: number } }).latency?.mean ?? 0) * 1000);
  return bench.tasks.map((t, i) => ({ stack: t.name, meanUs: means[i]!, addedUs: means[i]! - means[0]!, ratio: means[i]! / means[0]! }));
}

export function markdown(rows: Awaited<ReturnType<typeof measureChain>>): string {
  return [
    '| stack | mean µs per call | added µs | × bare |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.stack} | ${r.meanUs.toFixed(2)} | ${r.addedUs.toFixed(2)} | ${r.ratio.toFixed(2)} |`),
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`Interceptor chain around an instant peer (Node ${process.version}, built packages):\n`);
  console.log(markdown(await measureChain()));
  console.log('\n`agent.send` of 1 small value over wss on loopback, same interceptors:\n');
  console.log(markdown(await measureOverWebSocket()));
}
