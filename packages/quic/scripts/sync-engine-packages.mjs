// Keeps the platform packages (npm/<target>/package.json) and @agentlink/quic's optionalDependencies in step
// with @agentlink/quic's own package.json, the one source of truth for the version and the shared metadata.
//   node scripts/sync-engine-packages.mjs          rewrites what drifted
//   node scripts/sync-engine-packages.mjs --check  changes nothing; exits 1 naming what drifted (CI, tests)
//   --root <dir>                                    works on another copy of the package
// The targets are the napi-rs ones in package.json's `napi.targets`, named and split into os/cpu/libc by
// @napi-rs/cli's parseTriple, as `napi create-npm-dirs` names them. Hand-written rather than `napi version`:
// that command updates the npm/ versions only, has no check mode, and leaves optionalDependencies to
// `napi pre-publish`, which also publishes.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseTriple } from '@napi-rs/cli';

// --root <dir> points at another copy of the package (the drift test works on one).
const rootFlag = process.argv.indexOf('--root');
const root = rootFlag > 0 ? process.argv[rootFlag + 1] : fileURLToPath(new URL('..', import.meta.url));
const read = (path) => JSON.parse(readFileSync(path, 'utf8'));
const json = (value) => `${JSON.stringify(value, null, 2)}\n`;

const osNames = { linux: 'Linux', darwin: 'macOS', win32: 'Windows' };
// Fields whose drift breaks an install (checked strictly); the rest are copied metadata, reported only, so a
// field added to @agentlink/quic (say `repository`) does not fail CI before the next sync.
const strict = ['name', 'version', 'os', 'cpu', 'libc', 'main', 'files', 'license'];

/** What each platform package and the main package's optionalDependencies should say. */
export function expectedManifests(main) {
  const packages = main.napi.targets.map((triple) => {
    const { platformArchABI, platform, arch, abi } = parseTriple(triple);
    const file = `${main.napi.binaryName}.${platformArchABI}.node`;
    const manifest = {
      name: `${main.name}-${platformArchABI}`,
      version: main.version,
      description: `The QUIC engine of ${main.name} for ${osNames[platform] ?? platform} ${arch}${abi ? ` (${abi})` : ''}, prebuilt (${triple})`,
      os: [platform],
      cpu: [arch],
      ...(platform === 'linux' ? { libc: [abi === 'musl' ? 'musl' : 'glibc'] } : {}),
      main: file,
      files: [file],
      license: main.license,
      engines: main.engines,
      ...Object.fromEntries(['repository', 'homepage', 'bugs', 'author'].filter((key) => main[key] !== undefined).map((key) => [key, main[key]])),
    };
    return { dir: join(root, 'npm', platformArchABI), manifest };
  });
  const optionalDependencies = Object.fromEntries(packages.map(({ manifest }) => [manifest.name, `workspace:${main.version}`]));
  return { packages, optionalDependencies };
}

function main() {
  const check = process.argv.includes('--check');
  const mainPath = join(root, 'package.json');
  const pkg = read(mainPath);
  const { packages, optionalDependencies } = expectedManifests(pkg);
  const errors = [];
  const notes = [];
  for (const { dir, manifest } of packages) {
    const path = join(dir, 'package.json');
    const actual = existsSync(path) ? read(path) : undefined;
    if (actual && json(actual) === json(manifest)) continue;
    if (check) {
      const keys = new Set([...Object.keys(manifest), ...Object.keys(actual ?? {})]);
      for (const key of keys) {
        if (json(actual?.[key] ?? null) === json(manifest[key] ?? null)) continue;
        const line = `npm/${manifest.name.split('-').slice(1).join('-')}/package.json ${key}: ${JSON.stringify(actual?.[key])}, expected ${JSON.stringify(manifest[key])}`;
        (strict.includes(key) || !actual ? errors : notes).push(line);
      }
    } else {
      mkdirSync(dir, { recursive: true });
      writeFileSync(path, json(manifest));
      console.log(`wrote ${path}`);
    }
  }
  if (json(pkg.optionalDependencies ?? {}) !== json(optionalDependencies)) {
    if (check) errors.push(`@agentlink/quic optionalDependencies: ${JSON.stringify(pkg.optionalDependencies)}, expected ${JSON.stringify(optionalDependencies)}`);
    else {
      pkg.optionalDependencies = optionalDependencies;
      writeFileSync(mainPath, json(pkg));
      console.log(`wrote ${mainPath} optionalDependencies`);
    }
  }
  for (const note of notes) console.log(`metadata drift (run pnpm --filter @agentlink/quic sync:engines): ${note}`);
  if (errors.length > 0) {
    console.error(`engine packages out of step with @agentlink/quic ${pkg.version}:\n  ${errors.join('\n  ')}\nfix: pnpm --filter @agentlink/quic sync:engines`);
    process.exit(1);
  }
  if (check) console.log(`engine packages in step: ${packages.length} targets at ${pkg.version}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
