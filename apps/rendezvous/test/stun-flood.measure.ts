/**
 * Measures the STUN rate limit: `node --conditions=source --import tsx test/stun-flood.measure.ts 100000 5000` (from
 * apps/rendezvous) sends that many Binding requests from one IP at that pace and prints answered vs sent and bytes.
 */
import { startRendezvous } from '../src/index.js';
import { BINDING_REQUEST, stunMessage, udpClient } from './stun-wire.js';

const total = Number(process.argv[2] ?? 100_000);
const perSecond = Number(process.argv[3] ?? 5000);
const r = await startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: -1 });
const client = await udpClient();
const started = performance.now();
let sentBytes = 0;
for (let i = 0; i < total; i++) {
  const due = started + (i * 1000) / perSecond;
  while (performance.now() < due) await new Promise((resolve) => setImmediate(resolve));
  const request = stunMessage(BINDING_REQUEST);
  sentBytes += request.length;
  await client.send(request, r.stunPorts[i % 2]!);
}
await new Promise((resolve) => setTimeout(resolve, 500));
const seconds = (performance.now() - started) / 1000;
const answered = client.received.length;
const answerBytes = client.received.reduce((n, b) => n + b.length, 0);
console.log(JSON.stringify({ sent: total, seconds: +seconds.toFixed(1), answered, refused: r.metrics.stunCount('rate'), serverSaw: r.metrics.stunCount('answered') + r.metrics.stunCount('rate'), bytesIn: sentBytes, bytesOut: answerBytes, amplificationPerAnswer: answerBytes / answered / 20, overallRatio: +(answerBytes / sentBytes).toFixed(4) }));
client.socket.close();
await r.close();
