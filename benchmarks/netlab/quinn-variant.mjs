// Builds a QUIC engine on a patched quinn-proto, for `netlab --engines` A/B runs; the engine the packages ship is
// not touched (docs/performance-log.md, "QUIC pacing at BBR's rate").
//
//   node benchmarks/netlab/quinn-variant.mjs /tmp/variant.node pacer estimator [no-recovery]
//
// Each name is a patch in benchmarks/netlab/quinn-proto/ (they touch different files, so any combination applies):
//   pacer        the pacer refills at the controller's pacing rate when it reports one (BBR), as quinn's PR #2802
//                does upstream; window pacing (1.25 windows per smoothed RTT) for controllers without one
//   estimator    BBR's bandwidth samples are delivery rates over about a round trip, and every sample enters the
//                windowed max filter (quinn-proto 0.11: one packet over the gap between two ACK frames, entered
//                only when it beat the maximum, so the estimate only ever rose)
//   no-recovery  BBR keeps its window on loss (no packet-conservation recovery window)
// quinn-proto 0.11.19 comes from cargo's download cache (a `cargo fetch` of a throwaway manifest fills it when
// missing), checked against crates.io's SHA-256, and is patched in a temporary directory; cargo builds the engine
// with `--config patch.crates-io.quinn-proto.path=…` into its usual target directory, and Cargo.lock is put back.
// The next `pnpm build` builds the shipped engine again.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const CRATE = 'quinn-proto';
const VERSION = '0.11.19';
const SHA256 = '0e750cca55fe4f0439a15d0bb529da9651e79993e8e72c61a899a36d462befbe';

const [output, ...names] = process.argv.slice(2);
if (output === undefined || names.length === 0) {
  console.error('usage: node benchmarks/netlab/quinn-variant.mjs OUT.node PATCH… (pacer, estimator, no-recovery)');
  process.exit(2);
}
const here = fileURLToPath(new URL('.', import.meta.url));
const native = resolve(here, '../../packages/quic/native');
const patches = names.map((name) => join(here, 'quinn-proto', `${name}.patch`));
for (const patch of patches) if (!existsSync(patch)) throw new Error(`no patch ${patch}`);

const run = (command, args, options = {}) => {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}`);
};

const cargoHome = process.env.CARGO_HOME ?? join(homedir(), '.cargo');
const cached = () => {
  const cache = join(cargoHome, 'registry', 'cache');
  if (!existsSync(cache)) return undefined;
  for (const registry of readdirSync(cache)) {
    const file = join(cache, registry, `${CRATE}-${VERSION}.crate`);
    if (existsSync(file) && createHash('sha256').update(readFileSync(file)).digest('hex') === SHA256) return file;
  }
  return undefined;
};

const work = mkdtempSync(join(tmpdir(), 'agentlink-quinn-variant-'));
const lock = join(native, 'Cargo.lock');
const lockBefore = readFileSync(lock);
try {
  let crate = cached();
  if (crate === undefined) {
    const fetcher = join(work, 'fetch');
    mkdirSync(join(fetcher, 'src'), { recursive: true });
    writeFileSync(join(fetcher, 'src', 'lib.rs'), '');
    writeFileSync(join(fetcher, 'Cargo.toml'), `[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n${CRATE} = { version = "=${VERSION}", default-features = false }\n`);
    run('cargo', ['fetch', '--manifest-path', join(fetcher, 'Cargo.toml')]);
    crate = cached();
    if (crate === undefined) throw new Error(`no ${CRATE}-${VERSION}.crate with SHA-256 ${SHA256} in ${cargoHome}/registry/cache`);
  }
  run('tar', ['-xzf', crate, '-C', work]);
  const source = join(work, `${CRATE}-${VERSION}`);
  // Outside any git repository, git apply patches relative to the current directory.
  for (const patch of patches) run('git', ['apply', '-p1', patch], { cwd: source, env: { ...process.env, GIT_CEILING_DIRECTORIES: work } });
  run('cargo', ['build', '--release', '--manifest-path', join(native, 'Cargo.toml'), '--config', `patch.crates-io.${CRATE}.path=${JSON.stringify(source)}`]);
  const library = ['libagentlink_quic.so', 'libagentlink_quic.dylib', 'agentlink_quic.dll'].map((name) => join(native, 'target', 'release', name)).find(existsSync);
  if (library === undefined) throw new Error('cargo built no library');
  copyFileSync(library, output);
  console.log(`quinn-variant: ${names.join(' + ')} -> ${output}`);
} finally {
  writeFileSync(lock, lockBefore);
  rmSync(work, { recursive: true, force: true });
}
