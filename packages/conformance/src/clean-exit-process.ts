/**
 * Makes two agents, runs every kind of call between them (including failures and cancellations), closes both,
 * and then does nothing: the process must exit on its own, proving no handle (socket, timer) leaked.
 */
import { AgentError, createAgent } from '@agentlink/core';
import { installConformanceHandlers } from './handlers.js';
import { loadFactory } from './target.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as {
  module: string;
  factory: string;
  listenOptions: Record<string, unknown>;
  dialOptions?: Record<string, unknown>;
};
const factory = await loadFactory(spec);
const server = await createAgent({ channels: [factory(spec.listenOptions)] });
const client = await createAgent({ channels: [factory(spec.dialOptions ?? {})] });
installConformanceHandlers(server);
const address = server.addresses[0]!;
await client.send(address, 'echo', 'hello');
for await (const token of client.stream(address, 'tokens', { count: 100 })) if (token === 'token-10') break;
await client.send(address, 'throw', 'x').catch((e: AgentError) => e.code);
await client.send(address, 'wait-for-abort', null, { timeoutMs: 50 }).catch((e: AgentError) => e.code);
await client.send(address, 'nope').catch((e: AgentError) => e.code);
await client.ping(address);
await client.close();
await server.close();
process.stdout.write('closed\n');
