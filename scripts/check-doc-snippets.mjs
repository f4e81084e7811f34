#!/usr/bin/env node
// Type-checks every ```ts block of README.md and docs/*.md against the packages' sources, as a user would
// write them (strict, ESM, top-level await). Each block is its own module. A block may rely on names the text
// around it introduces: declare them in an HTML comment right before the block, invisible when rendered:
//   <!-- snippet-context: declare const myModel: { stream(p: string, o: { signal: AbortSignal }): AsyncIterable<string> }; -->
// A self-contained block marked `<!-- snippet: run -->` (right before it, or before its snippet-context) is also
// run, from the workspace's sources, and must exit 0 within 60 s: such blocks listen on port 0 and close what they open.
// Usage: node scripts/check-doc-snippets.mjs   (exit 1 with tsc's errors, mapped to the markdown lines)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'node_modules/.doc-snippets');
const sources = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const origins = new Map(); // snippet file -> { source, line } of the block's first line
const runnable = []; // [snippet file, block text] of the blocks marked to run
for (const source of sources) {
  const lines = readFileSync(join(root, source), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```ts') continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end].trim() !== '```') end++;
    const context = /^<!--\s*snippet-context:(.*)-->$/s.exec(lines[i - 1]?.trim() ?? '')?.[1]?.trim() ?? '';
    const name = `${source.replace(/[/.]/g, '_')}_${start + 1}.ts`;
    // The context goes on the first line, so line numbers of the block stay those of the markdown.
    writeFileSync(join(out, name), `${context} export {};\n${lines.slice(start, end).join('\n')}\n`);
    origins.set(name, { source, line: start });
    const marks = [lines[i - 1], lines[i - 2]].map((line) => line?.trim());
    if (marks.includes('<!-- snippet: run -->')) runnable.push([name, lines.slice(start, end).join('\n')]);
    i = end;
  }
}

writeFileSync(
  join(out, 'tsconfig.json'),
  JSON.stringify({
    extends: '../../tsconfig.base.json',
    compilerOptions: { noEmit: true, noUnusedLocals: false, baseUrl: '../..', paths: {
      '@agentlink/core/transport': ['packages/core/src/transport.ts'],
      '@agentlink/*': ['packages/*/src/index.ts', 'apps/*/src/index.ts'],
      // As in tsconfig.json: the declarations of a dependency that publishes TypeScript under `source`.
      'eventsource-parser': ['node_modules/eventsource-parser/dist/index.d.ts'],
      'eventsource-parser/stream': ['node_modules/eventsource-parser/dist/stream.d.ts'],
    } },
    // Ambient declarations the packages ship beside their sources (types of untyped dependencies).
    include: ['*.ts', '../../packages/*/src/*.d.ts'],
  }),
);

try {
  execFileSync(join(root, 'node_modules/.bin/tsc'), ['-p', join(out, 'tsconfig.json')], { cwd: root, stdio: 'pipe' });
  console.log(`doc snippets: ${origins.size} TypeScript blocks in ${sources.length} files type-check`);
} catch (error) {
  const text = String(error.stdout ?? error);
  // node_modules/.doc-snippets/docs_x_md_12.ts(3,5): error … → docs/x.md:14:5: error …
  const mapped = text.replace(/(?:node_modules\/\.doc-snippets\/)?([\w.-]+\.ts)\((\d+),(\d+)\)/g, (whole, file, line, column) => {
    const origin = origins.get(file);
    return origin ? `${origin.source}:${origin.line + Number(line) - 1}:${column}` : whole;
  });
  console.error(mapped.trim());
  console.error(`\ndoc snippets: TypeScript blocks in ${relative(root, join(root, 'docs'))} or README.md do not type-check`);
  process.exit(1);
}

// Run the marked blocks from a package that depends on every channel, so @agentlink/* resolve to the workspace.
const runDir = join(root, 'packages/integration/.doc-snippets');
rmSync(runDir, { recursive: true, force: true });
mkdirSync(runDir, { recursive: true });
let failed = 0;
for (const [name, text] of runnable) {
  const file = join(runDir, name);
  writeFileSync(file, `${text}\n`);
  const { source, line } = origins.get(name);
  const result = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', file], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) {
    failed++;
    console.error(`${source}:${line}: the block marked to run ${result.error ? `did not end (${result.error.message})` : `exited with ${result.status}`}\n${result.stdout}${result.stderr}`);
  }
}
rmSync(runDir, { recursive: true, force: true });
if (failed > 0) process.exit(1);
console.log(`doc snippets: ${runnable.length} self-contained blocks run`);
