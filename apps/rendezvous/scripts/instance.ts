/** One rendezvous instance in its own process, its options as JSON in argv[2] (for cluster-scale.ts's kill run). */
import { startRendezvous } from '../src/index.js';

const r = await startRendezvous(JSON.parse(process.argv[2]!) as Parameters<typeof startRendezvous>[0]);
process.stdout.write(`${JSON.stringify({ address: r.address })}\n`);
