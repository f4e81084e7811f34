/**
 * A conformance peer in its own process, so tests can kill it (SIGKILL) mid-call and start it again as itself.
 * argv[2]: JSON { module, factory, listenOptions, keyFile?, port? }: with `keyFile` the peer is that identity,
 * with `port` it listens there (a restart on its predecessor's address). Prints one JSON line { address }
 * when ready.
 */
import { createAgent, loadIdentity } from '@agentlink/core';
import { installConformanceHandlers } from './handlers.js';
import { loadFactory } from './target.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as {
  module: string;
  factory: string;
  listenOptions: Record<string, unknown>;
  keyFile?: string;
  port?: number;
};
const factory = await loadFactory(spec);
const listenOptions = spec.port === undefined ? spec.listenOptions : { ...spec.listenOptions, port: spec.port };
const identity = spec.keyFile === undefined ? undefined : await loadIdentity(spec.keyFile);
const agent = await createAgent({ identity, channels: [factory(listenOptions)] });
installConformanceHandlers(agent);
process.stdout.write(`${JSON.stringify({ address: agent.addresses[0] })}\n`);
// Exit when the parent goes away, so a failed test never leaves a peer behind.
process.stdin.resume();
process.stdin.on('end', () => void agent.close().then(() => process.exit(0)));
