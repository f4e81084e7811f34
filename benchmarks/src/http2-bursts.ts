/**
 * A 1,000-token burst over HTTP/2 in agentbench's shape, for builds of agentlink against raw node:http2 in one run:
 * each subject serves from its own process (the raw one writes 1,000 16-byte tokens on a response without
 * waiting, as agentbench's server does; agentlink's handler yields them), the caller measures time to first token
 * and the time per token from the first to the last (agentbench's per-token figure). Subjects take turns in
 * rounds (5 bursts each, their medians); "× raw", "over raw" and "− first build" are medians of per-round
 * ratios and differences, with the middle half of the rounds in brackets.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks ab-builds snapshot before   (then change, build)
 *   pnpm --filter @agentlink/benchmarks http2-bursts --builds before,current [--rounds 30]
 *   pnpm --filter @agentlink/benchmarks http2-bursts --chunks [--builds current]   (when each chunk reached the caller)
 *
 * `--echoes N`: before its bursts in each round, each subject makes N 1 KB echo calls one at a time and 1.6 N with
 * 32 in flight, as agentbench's interleaved rounds do (600 and 960): the bursts then run in processes kept busy,
 * as agentbench's do, not after an idle pause (whose wake-ups move time to first token by ~1 ms and the per-token
 * figure with it).
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { connect, createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Readable } from 'node:stream';
const root = fileURLToPath(new URL('../../', import.meta.url));
const TOKENS = 1000, BYTES = 16, BURSTS = 5;
const load = (build: string, pkg: string) => build === 'current' ? import(`@agentlink/${pkg}`) : import(`${root}benchmarks/.builds/${build}/node_modules/@agentlink/${pkg}/dist/index.js`);
const { values: args, positionals } = parseArgs({ allowPositionals: true, options: { builds: { type: 'string', default: 'current' }, rounds: { type: 'string', default: '30' }, chunks: { type: 'boolean', default: false }, echoes: { type: 'string', default: '0' } } });
const [mode, arg] = positionals;
if (mode === 'serve') {
  process.on('SIGTERM', () => process.exit(0));
  if (arg === 'raw') {
    const { Identity } = await import('@agentlink/core');
    const { selfSignedCertificate } = await import('@agentlink/core/transport');
    const tls = selfSignedCertificate(Identity.generate());
    const h2 = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 << 20 } });
    h2.on('session', (s) => s.setLocalWindowSize(32 << 20));
    h2.on('stream', (stream, headers) => {
      if (headers[':path'] === '/echo') {
        const parts: Buffer[] = [];
        stream.on('data', (d: Buffer) => parts.push(d));
        stream.on('end', () => { stream.respond({ ':status': 200 }); stream.end(Buffer.concat(parts)); });
        return;
      }
      stream.respond({ ':status': 200 });
      const b = Buffer.alloc(BYTES, 7);
      (async () => { for (let i = 0; i < TOKENS; i++) if (!stream.write(b)) await once(stream, 'drain'); stream.end(); })();
    });
    await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
    process.send!(`https://127.0.0.1:${(h2.address() as AddressInfo).port}`);
  } else {
    const core = await load(arg!, 'core');
    const { http2 } = await load(arg!, 'http2');
    const agent = await core.createAgent({ channels: [http2({ port: 0, host: '127.0.0.1' })] });
    agent.handle('echo', (body: unknown) => body);
    agent.handleStream('download', async function* ({ total, chunk }: { total: number; chunk: number }) {
      const buffer = Buffer.alloc(chunk, 7);
      for (let sent = 0; sent < total; sent += chunk) yield buffer;
    });
    process.send!(agent.addresses[0]);
  }
} else {
  const builds = args.builds!.split(',');
  const rounds = Number(args.rounds);
  const subjects: Array<{ name: string; burst: () => Promise<{ ttft: number; per: number }>; echo: () => Promise<unknown>; ttft: number[]; per: number[]; child: any }> = [];
  const payload = Buffer.alloc(1024, 5);
  for (const name of ['raw', ...builds]) {
    const child = fork(fileURLToPath(import.meta.url), ['serve', name], { execArgv: process.execArgv });
    const [address] = (await once(child, 'message')) as [string];
    let burst: () => Promise<{ ttft: number; per: number }>;
    let echo: () => Promise<unknown>;
    if (name === 'raw') {
      const session = connect(address, { rejectUnauthorized: false, settings: { initialWindowSize: 8 << 20 } });
      await once(session, 'connect');
      session.setLocalWindowSize(32 << 20);
      echo = () => new Promise((resolve, reject) => {
        const s = session.request({ ':path': '/echo', ':method': 'POST' });
        s.on('data', () => undefined);
        s.on('end', resolve);
        s.on('error', reject);
        s.end(payload);
      });
      burst = () => new Promise((resolve, reject) => {
        const started = performance.now();
        let first = 0, bytes = 0;
        const s = session.request({ ':path': '/download', ':method': 'GET' });
        s.on('data', (d: Buffer) => { if (first === 0) first = performance.now(); bytes += d.length; });
        s.on('end', () => { const end = performance.now(); bytes === TOKENS * BYTES ? resolve({ ttft: first - started, per: ((end - first) * 1000) / (TOKENS - 1) }) : reject(new Error('short')); });
        s.on('error', reject);
        s.end();
      });
    } else {
      const core = await load(name, 'core');
      const { http2 } = await load(name, 'http2');
      const client = await core.createAgent({ channels: [http2()] });
      await client.ping(address);
      echo = () => client.send(address, 'echo', payload);
      burst = async () => {
        const started = performance.now();
        let first = 0, bytes = 0;
        for await (const chunk of client.stream(address, 'download', { total: TOKENS * BYTES, chunk: BYTES })) {
          if (first === 0) first = performance.now();
          bytes += (chunk as Uint8Array).length;
        }
        const end = performance.now();
        if (bytes !== TOKENS * BYTES) throw new Error('short');
        return { ttft: first - started, per: ((end - first) * 1000) / (TOKENS - 1) };
      };
    }
    subjects.push({ name, burst, echo, ttft: [], per: [], child });
  }
  if (args.chunks) {
    // The chunks node hands the caller's stream during a burst of the first build: when each came, its size.
    const subject = subjects[1]!;
    let log: string[] = [];
    let t0 = 0;
    const push = Readable.prototype.push;
    Readable.prototype.push = function (this: Readable, chunk: any, encoding?: BufferEncoding) {
      if (this.constructor.name === 'ClientHttp2Stream' && chunk) log.push(`${(performance.now() - t0).toFixed(2)}:${chunk.length}`);
      return push.call(this, chunk, encoding);
    };
    for (let i = 0; i < 15; i++) {
      log = [];
      t0 = performance.now();
      const { ttft, per } = await subject.burst();
      if (i >= 10) console.log(`${subject.name}: TTFT ${ttft.toFixed(2)} ms, ${per.toFixed(2)} µs per token; chunks (ms from the call:bytes) ${log.join(' ')}`);
    }
    Readable.prototype.push = push;
    for (const s of subjects) s.child.kill();
    process.exit(0);
  }
  const median = (v: number[]) => { const s = [...v].sort((a, b) => a - b); return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };
  const q = (v: number[], p: number) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))]!; };
  for (let round = 0; round <= rounds; round++) {
    for (let i = 0; i < subjects.length; i++) {
      const s = subjects[(round + i) % subjects.length]!;
      const echoes = Number(args.echoes);
      for (let e = 0; e < echoes; e++) await s.echo();
      let next = 0;
      await Promise.all(Array.from({ length: 32 }, async () => { while (next++ < 1.6 * echoes) await s.echo(); }));
      const bs = [];
      for (let b = 0; b < BURSTS; b++) bs.push(await s.burst());
      if (round > 0) { s.ttft.push(median(bs.map((x) => x.ttft))); s.per.push(median(bs.map((x) => x.per))); }
    }
  }
  const raw = subjects[0]!, first = subjects[1]!;
  const os = await import('node:os');
  console.log(`${rounds} rounds × ${BURSTS} bursts${Number(args.echoes) > 0 ? `, ${args.echoes} echoes before each` : ''}; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log('| subject | TTFT ms | TTFT × raw [IQR] | per-token µs | over raw µs [IQR] | TTFT × first build | per-token − first build, µs |');
  const f = (v: number[], d = 2) => `${median(v).toFixed(d)} [${q(v, 0.25).toFixed(d)}–${q(v, 0.75).toFixed(d)}]`;
  for (const s of subjects) {
    const tr = s.ttft.map((t, r) => t / raw.ttft[r]!), pd = s.per.map((p, r) => p - raw.per[r]!);
    const tf = s.ttft.map((t, r) => t / first.ttft[r]!), pf = s.per.map((p, r) => p - first.per[r]!);
    console.log(`| ${s.name} | ${f(s.ttft)} | ${s === raw ? '' : f(tr)} | ${f(s.per)} | ${s === raw ? '' : f(pd)} | ${s === raw || s === first ? '' : f(tf, 3)} | ${s === raw || s === first ? '' : f(pf)} |`);
  }
  for (const s of subjects) s.child.kill();
  process.exit(0);
}
