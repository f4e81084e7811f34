/**
 * The peer of a local run, as its own process: prints the addresses, serves until stdin closes. Arguments: the
 * host to bind, and optionally the QUIC congestion controller (the network lab compares them; default: the engine's).
 */
import type { QuicCongestion } from '@agentlink/quic';
import { startServers } from './server.js';

const servers = await startServers(process.argv[2], process.argv[3] as QuicCongestion | undefined);
process.stdout.write(`${JSON.stringify(servers.addresses)}\n`);
process.stdin.resume();
process.stdin.on('end', () => void servers.close().then(() => process.exit(0)));
