#!/usr/bin/env node
// Packs every published package with `pnpm pack` (workspace: ranges become versions, publishConfig applies),
// plus each platform package of @agentlink/quic that holds a built engine (*.node). Used by
// scripts/release-check.mjs and by the Dockerfile's context (`node scripts/pack.mjs` writes .release/tarballs/).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PUBLISHED } from './package-meta.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Platform package directories (packages/quic/npm/<target>) that hold a built engine. */
export function engineDirs() {
  const npm = join(root, 'packages/quic/npm');
  if (!existsSync(npm)) return [];
  return readdirSync(npm, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && readdirSync(join(npm, entry.name)).some((file) => file.endsWith('.node')))
    .map((entry) => `packages/quic/npm/${entry.name}`);
}

/** Packs into `destination`; returns the tarball names and the engine targets packed. */
export function packAll(destination) {
  mkdirSync(destination, { recursive: true });
  const engines = engineDirs();
  for (const dir of [...engines, ...PUBLISHED]) {
    execFileSync('pnpm', ['pack', '--pack-destination', destination], { cwd: join(root, dir), stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return { tarballs: readdirSync(destination).filter((file) => file.endsWith('.tgz')), engineTargets: engines.map((dir) => dir.split('/').pop()) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const destination = join(root, '.release/tarballs');
  rmSync(destination, { recursive: true, force: true });
  const { tarballs, engineTargets } = packAll(destination);
  console.log(`${tarballs.length} tarballs in .release/tarballs (engines: ${engineTargets.join(', ') || 'none'})`);
}
