/** The peer of a local run, as its own process: prints the addresses, serves until stdin closes. */
import { startServers } from './server.js';

const servers = await startServers(process.argv[2]);
process.stdout.write(`${JSON.stringify(servers.addresses)}\n`);
process.stdin.resume();
process.stdin.on('end', () => void servers.close().then(() => process.exit(0)));
