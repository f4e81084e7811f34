import { checkMsgpackShape, FrameDecoder, decodePayload } from './src/index.js';
import { containerFloodPayload, deepPayload, frame } from './test/fuzz/inputs.js';
for (const [name, p] of [['flood300k', containerFloodPayload(300_000)], ['deep100k-array', deepPayload(100_000, 'array')], ['deep100k-map', deepPayload(100_000, 'map')]] as const) {
  const f = frame(p);
  const ts: number[] = []; const ts2: number[] = [];
  for (let i = 0; i < 30; i++) {
    let t = performance.now();
    try { checkMsgpackShape(p) } catch {}
    ts.push(performance.now() - t);
    t = performance.now();
    try { for (const x of new FrameDecoder().push(f)) decodePayload(x) } catch (e) { if (i === 0) console.log((e as Error).message) }
    ts2.push(performance.now() - t);
  }
  ts.sort((a, b) => a - b); ts2.sort((a, b) => a - b);
  console.log(name, p.length, 'scan median ms', ts[15]!.toFixed(3), 'min', ts[0]!.toFixed(3), 'decoder path median', ts2[15]!.toFixed(3), 'max', ts2[29]!.toFixed(3));
}
