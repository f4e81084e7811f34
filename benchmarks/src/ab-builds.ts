/**
 * A/B of two (or more) builds of agentlink in one process, for changes too small for agentbench to resolve on a
 * shared machine: each build's caller and handler talk over a real loopback channel, and the builds take turns in
 * short rounds, so drift lands on all of them alike. The figure is the median of per-round ratios to the first
 * build. On this 2-core VM a build compared with a copy of itself reads within ~1% (about 0.5 µs of a 55 µs
 * call): smaller differences need repeated runs in both orders.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks ab-builds snapshot before
 *   (change something) pnpm build && pnpm --filter @agentlink/benchmarks ab-builds snapshot after
 *   pnpm --filter @agentlink/benchmarks ab-builds compare before after [--channel http2|ws|quic] [--rounds 14] [--in-flight 32]
 *
 * `--in-flight n` keeps n calls in flight (default 1: one at a time): with caller and handler in one process the
 * figure is then CPU per call under concurrency, where per-turn costs (syscalls, TLS records) are shared by many calls.
 *
 * A snapshot copies the built core and channel packages (dist + package.json, and the QUIC engine's addon) under benchmarks/.builds/<name>,
 * with their third-party dependencies linked, so each build loads its own copy of every agentlink module.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './median.js';

const PACKAGES = ['core', 'http2', 'ws', 'quic'];
const root = fileURLToPath(new URL('../../', import.meta.url));
const buildsDir = join(root, 'benchmarks/.builds');

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    channel: { type: 'string', default: 'http2' },
    rounds: { type: 'string', default: '14' },
    calls: { type: 'string', default: '6000' },
    'in-flight': { type: 'string', default: '1' },
  },
});
const [command, ...names] = positionals;

if (command === 'snapshot' && names.length === 1) snapshot(names[0]!);
else if (command === 'compare' && names.length >= 2) await compare(names, values.channel!, Number(values.rounds), Number(values.calls), Number(values['in-flight']));
else {
  console.error('usage: ab-builds snapshot <name> | ab-builds compare <name> <name> [...] [--channel http2|ws|quic] [--rounds n] [--calls n] [--in-flight n]');
  process.exit(2);
}

function snapshot(name: string): void {
  const modules = join(buildsDir, name, 'node_modules');
  rmSync(join(buildsDir, name), { recursive: true, force: true });
  for (const pkg of PACKAGES) {
    const from = join(root, 'packages', pkg);
    if (!existsSync(join(from, 'dist'))) throw new Error(`packages/${pkg} is not built: run pnpm build first`);
    const to = join(modules, '@agentlink', pkg);
    mkdirSync(to, { recursive: true });
    cpSync(join(from, 'dist'), join(to, 'dist'), { recursive: true });
    cpSync(join(from, 'package.json'), join(to, 'package.json'));
    // The QUIC engine built in place (agentlink-quic.<target>.node) loads from the package's root.
    for (const file of readdirSync(from)) if (file.endsWith('.node')) cpSync(join(from, file), join(to, file));
    // Third-party dependencies resolve from the snapshot's node_modules: link them there once.
    for (const dep of readdirSync(join(from, 'node_modules'))) {
      if (dep === '@agentlink' || existsSync(join(modules, dep))) continue;
      symlinkSync(realpathSync(join(from, 'node_modules', dep)), join(modules, dep));
    }
  }
  console.log(`snapshot ${name}: ${PACKAGES.join(', ')} in ${join(buildsDir, name)}`);
}

async function compare(builds: string[], channel: string, rounds: number, callsPerRound: number, inFlight: number): Promise<void> {
  const payload = Buffer.alloc(1024, 1);
  const calls: Array<() => Promise<unknown>> = [];
  for (const name of builds) {
    const modules = join(buildsDir, name, 'node_modules/@agentlink');
    const core = await import(join(modules, 'core/dist/index.js'));
    const transport =
      channel === 'ws'
        ? (await import(join(modules, 'ws/dist/index.js'))).webSocket
        : channel === 'quic'
          ? (await import(join(modules, 'quic/dist/index.js'))).quic
          : (await import(join(modules, 'http2/dist/index.js'))).http2;
    const server = await core.createAgent({ channels: [transport({ port: 0, host: '127.0.0.1' })] });
    server.handle('echo', (body: unknown) => body);
    const client = await core.createAgent({ channels: [transport()] });
    const address: string = server.addresses[0];
    await client.ping(address);
    calls.push(() => client.send(address, 'echo', payload));
  }
  const perCall: number[][] = builds.map(() => []);
  /** CPU time per call (process.cpuUsage, every thread): steadier than wall time when the host is contended. */
  const cpuPerCall: number[][] = builds.map(() => []);
  // Rounds 0 and 1 warm every build up; each round starts with the next build.
  for (let round = 0; round < rounds + 2; round++) {
    for (let turn = 0; turn < builds.length; turn++) {
      const index = (round + turn) % builds.length;
      const started = performance.now();
      const cpu = process.cpuUsage();
      const call = calls[index]!;
      let next = 0;
      await Promise.all(Array.from({ length: inFlight }, async () => {
        while (next++ < callsPerRound) await call();
      }));
      const used = process.cpuUsage(cpu);
      if (round >= 2) {
        perCall[index]!.push(((performance.now() - started) * 1000) / callsPerRound);
        cpuPerCall[index]!.push((used.user + used.system) / callsPerRound);
      }
    }
  }
  const { loadavg } = await import('node:os');
  console.log(`${channel}, 1 KB echo, caller and handler in one process, ${inFlight} in flight; ${rounds} rounds of ${callsPerRound} calls per build; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log('| build | µs per call (median) | × first build (median of per-round ratios) | CPU µs per call | × first build (CPU) |\n|---|---|---|---|---|');
  for (const [index, name] of builds.entries()) {
    const ratios = perCall[index]!.map((us, round) => us / perCall[0]![round]!);
    const cpuRatios = cpuPerCall[index]!.map((us, round) => us / cpuPerCall[0]![round]!);
    const spread = (values: number[]): string => `${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)}`;
    console.log(
      `| ${name} | ${median(perCall[index]!).toFixed(1)} | ${median(ratios).toFixed(3)} (${spread(ratios)}) | ${median(cpuPerCall[index]!).toFixed(1)} | ${median(cpuRatios).toFixed(3)} (${spread(cpuRatios)}) |`,
    );
  }
  process.exit(0);
}
