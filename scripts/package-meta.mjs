#!/usr/bin/env node
// The metadata every published package carries, kept in one place: license (the root LICENSE, copied into each
// package so its tarball has it), repository (with the package's directory), engines, and a `publishConfig` whose
// `exports` drop the monorepo-only `source` condition (it points at src/*.ts, which is not shipped).
// Usage: node scripts/package-meta.mjs          rewrite the manifests and copy LICENSE
//        node scripts/package-meta.mjs --check  exit 1 if a manifest or LICENSE copy is out of date
import { copyFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const REPOSITORY = 'git+https://github.com/agentlink/agentlink.git';
/** The packages npm users install (the platform packages of @agentlink/quic are kept by their own script). */
export const PUBLISHED = ['packages/core', 'packages/ws', 'packages/http2', 'packages/quic', 'packages/nat', 'packages/mcp', 'packages/conformance', 'packages/agentbench', 'apps/rendezvous'];

/** `exports` as published: the same entries without `source`. */
function publishedExports(exports) {
  if (typeof exports !== 'object' || exports === null) return exports;
  return Object.fromEntries(
    Object.entries(exports).map(([key, value]) => {
      if (typeof value !== 'object' || value === null) return [key, value];
      const { source: _source, ...rest } = value;
      return [key, rest];
    }),
  );
}

function expected(dir, manifest) {
  const next = { ...manifest };
  next.license = 'MIT';
  next.repository = { type: 'git', url: REPOSITORY, directory: dir };
  next.engines = { node: manifest.engines?.node ?? '>=20' };
  if (next.exports) next.publishConfig = { ...next.publishConfig, exports: publishedExports(next.exports) };
  next.publishConfig = { ...next.publishConfig, access: 'public' };
  return next;
}

/**
 * Workspace packages that npm would publish (no `private: true`) but PUBLISHED leaves out: never packed, never
 * checked, while the docs tell users to install them (@agentlink/mcp was one).
 */
function unlisted() {
  const dirs = ['packages', 'apps'].flatMap((parent) =>
    readdirSync(join(root, parent), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(join(root, parent, entry.name, 'package.json')))
      .map((entry) => `${parent}/${entry.name}`),
  );
  return dirs.filter((dir) => !PUBLISHED.includes(dir) && JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')).private !== true);
}

/** Rewrites (or with `check`, verifies) the manifests and LICENSE copies; exits 1 on a difference. */
function main(check) {
  const stale = unlisted().map((dir) => `${dir}: neither in PUBLISHED (scripts/package-meta.mjs) nor private`);
  for (const dir of PUBLISHED) {
    const file = join(root, dir, 'package.json');
    const text = readFileSync(file, 'utf8');
    const manifest = JSON.parse(text);
    const next = `${JSON.stringify(expected(dir, manifest), null, 2)}\n`;
    for (const field of ['description', 'keywords']) if (!manifest[field] || manifest[field].length === 0) stale.push(`${dir}: no ${field}`);
    if (!existsSync(join(root, dir, 'README.md'))) stale.push(`${dir}: no README.md`);
    const license = join(root, dir, 'LICENSE');
    const licenseCurrent = existsSync(license) && readFileSync(license, 'utf8') === readFileSync(join(root, 'LICENSE'), 'utf8');
    if (check) {
      if (next !== text) stale.push(`${dir}/package.json: run node scripts/package-meta.mjs`);
      if (!licenseCurrent) stale.push(`${dir}/LICENSE: differs from the root LICENSE`);
    } else {
      if (next !== text) writeFileSync(file, next);
      if (!licenseCurrent) copyFileSync(join(root, 'LICENSE'), license);
    }
  }
  if (stale.length > 0) {
    console.error(stale.join('\n'));
    process.exit(1);
  }
  console.log(`package metadata: ${PUBLISHED.length} packages ${check ? 'up to date' : 'written'}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main(process.argv.includes('--check'));
