#!/usr/bin/env node
/** The rendezvous as a process: `agentlink-rendezvous --port 4433` (see --help). Stops cleanly on SIGTERM/SIGINT. */
import { AgentError } from '@agentlink/core';
import { configFrom, type RendezvousConfig } from './config.js';
import { jsonLogger } from './log.js';
import { startRendezvous, type Rendezvous } from './rendezvous.js';

let rendezvous: Rendezvous;
try {
  // `npm run start -- --port 1` drops the `--`; pnpm 10 passes it on: accept both.
  const argv = process.argv[2] === '--' ? process.argv.slice(3) : process.argv.slice(2);
  const config: RendezvousConfig = configFrom(argv, process.env);
  rendezvous = await startRendezvous({ ...config, log: jsonLogger });
} catch (error) {
  // A wrong setting or key file is the operator's to fix: one line saying which, no stack trace.
  // Valkey/Redis unreachable at start: one line too, and exit 1 so that a supervisor starts it again.
  if (error instanceof AgentError && error.code === 'UNAVAILABLE') {
    process.stderr.write(`agentlink-rendezvous: ${error.message}\n`);
    process.exit(1);
  }
  if (!(error instanceof AgentError && (error.code === 'INVALID_ARGUMENT' || error.code === 'INVALID_KEY_FILE'))) throw error;
  process.stderr.write(`agentlink-rendezvous: ${error.message}\n`);
  process.exit(2);
}
// One line a supervisor or test can read: where agents find it.
console.log(JSON.stringify({ address: rendezvous.address, stunPorts: rendezvous.stunPorts, httpPort: rendezvous.httpPort }));

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    jsonLogger('info', 'stopping', { signal });
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    void rendezvous.close().then(() => process.exit(0));
  });
}
