#!/usr/bin/env node
// Runs the built CLI (what users install, and what the figures in docs/ come from). Inside the repository
// before `pnpm build`, or with AGENTBENCH_FROM_SOURCE=1, it runs the TypeScript source through tsx instead:
// handy while developing, but slower (tsx's keepNames wraps every function), so not for published figures.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const built = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const source = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
if (existsSync(source) && (process.env.AGENTBENCH_FROM_SOURCE === '1' || !existsSync(built))) {
  const result = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', source, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
} else {
  await import(built);
}
