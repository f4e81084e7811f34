#!/usr/bin/env node
// Runs the built CLI when installed from npm; inside the repository, runs the TypeScript source.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const built = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const source = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
if (existsSync(source)) {
  const result = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', source, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
} else {
  await import(built);
}
