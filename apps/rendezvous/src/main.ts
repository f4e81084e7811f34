#!/usr/bin/env node
/** The rendezvous as a process: `agentlink-rendezvous --port 4433` (see --help). Stops cleanly on SIGTERM/SIGINT. */
import { configFrom } from './config.js';
import { jsonLogger } from './log.js';
import { startRendezvous } from './rendezvous.js';

const config = configFrom(process.argv.slice(2), process.env);
const rendezvous = await startRendezvous({ ...config, log: jsonLogger });
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
