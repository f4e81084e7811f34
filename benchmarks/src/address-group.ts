/**
 * What core's `addressGroup` costs per call (it runs per accepted connection, and per rendezvous request), for
 * each module given, interleaved: 5 rounds of 500,000 calls per spelling, the first round dropped as warm-up;
 * prints the median and range of the other four in ns per call. A/B across commits:
 *
 *   git show <commit>:packages/core/src/listener/address-group.ts > /tmp/ag-<name>.ts
 *   node --import tsx benchmarks/src/address-group.ts /tmp/ag-a.ts /tmp/ag-b.ts packages/core/src/listener/address-group.ts
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

type AddressGroup = (ip: string, ipv6PrefixLength: number) => string;
const SPELLINGS: Record<string, string> = {
  ipv4: '192.0.2.7',
  'ipv4-mapped': '::ffff:192.0.2.7', // every IPv4 peer of a dual-stack listener
  ipv6: '2001:db8:1:2:a:b:c:d',
  'ipv6 short': '2001:db8::5',
};
const CALLS = 500_000;

const modules = process.argv.slice(2);
const fns = await Promise.all(modules.map(async (path) => ((await import(pathToFileURL(resolve(path)).href)) as { addressGroup: AddressGroup }).addressGroup));
const ns: number[][][] = Object.keys(SPELLINGS).map(() => fns.map(() => []));
for (let round = 0; round < 5; round++) {
  Object.values(SPELLINGS).forEach((ip, s) =>
    fns.forEach((addressGroup, f) => {
      let length = 0;
      const started = performance.now();
      for (let i = 0; i < CALLS; i++) length += addressGroup(ip, 64).length;
      if (length === 0) throw new Error('no key');
      if (round > 0) ns[s]![f]!.push(((performance.now() - started) * 1e6) / CALLS);
    }),
  );
}
Object.keys(SPELLINGS).forEach((name, s) => {
  const cells = modules.map((path, f) => {
    const sorted = ns[s]![f]!.sort((a, b) => a - b);
    const median = (sorted[1]! + sorted[2]!) / 2;
    return `${path}: ${median.toFixed(0)} ns (${sorted[0]!.toFixed(0)}–${sorted[3]!.toFixed(0)})`;
  });
  console.log(`${name.padEnd(12)} ${cells.join(' | ')}`);
});
