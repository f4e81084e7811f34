/**
 * A conformance peer in its own process, so tests can kill it (SIGKILL) mid-call.
 * argv[2]: JSON { module, factory, listenOptions }. Prints one JSON line { address } when ready.
 */
import { createAgent } from '@agentlink/core';
import { installConformanceHandlers } from './handlers.js';
import { loadFactory } from './target.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as { module: string; factory: string; listenOptions: Record<string, unknown> };
const factory = await loadFactory(spec);
const agent = await createAgent({ channels: [factory(spec.listenOptions)] });
installConformanceHandlers(agent);
process.stdout.write(`${JSON.stringify({ address: agent.addresses[0] })}\n`);
// Exit when the parent goes away, so a failed test never leaves a peer behind.
process.stdin.resume();
process.stdin.on('end', () => void agent.close().then(() => process.exit(0)));
