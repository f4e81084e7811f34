#!/usr/bin/env node
// `pnpm release:check`: what a new user gets from npm, tried before publishing. Packs every published package
// (and every platform package of @agentlink/quic holding a built engine), publishes the tarballs to a throwaway
// Verdaccio on loopback, then, in fresh directories outside the monorepo, with plain npm and cargo off PATH:
//   - an ESM (NodeNext) app, a bundler-resolution app and a CommonJS app (import()) type-check against the
//     published declarations (skipLibCheck off; the CommonJS one also with module: commonjs) and run two agents
//     streaming tokens over ws, http2 and, when an engine for this platform was published, quic; the ESM one also
//     calls an MCP tool through @agentlink/mcp with the official SDK;
//   - `npx agentbench --quick` and `npx @agentlink/rendezvous` (answering /healthz) from that registry.
// Needs `pnpm build` first. Exit status 0 only when every step passed.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packAll } from './pack.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
// Verdaccio 5: 6.x needs Node >= 22. Its audit plugin asks for node-fetch by the dist-tag "cjs", which registry
// mirrors that keep only "latest" do not serve: pinned to the version that tag names.
const VERDACCIO = { version: '5.33.0', overrides: { 'verdaccio-audit': { 'node-fetch': '2.7.0' } } };
const TYPESCRIPT_RANGE = '~5.9.0';
// What a user of @agentlink/mcp installs beside it (its README): the SDK, and zod for tool schemas.
const MCP_SDK_RANGE = '^1.32.2';
const ZOD_RANGE = '^4.1.0';
const started = Date.now();
const work = mkdtempSync(join(tmpdir(), 'agentlink-release-'));
const children = [];
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
const step = (text) => console.log(`\n--> ${text} (${elapsed()})`);

/** PATH without any directory holding cargo or rustc: the installs must not need a Rust toolchain. */
const pathWithoutCargo = process.env.PATH.split(delimiter)
  .filter((dir) => !existsSync(join(dir, 'cargo')) && !existsSync(join(dir, 'rustc')))
  .join(delimiter);

function run(command, args, options = {}) {
  try {
    return execFileSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', ...options });
  } catch (error) {
    throw new Error(`${command} ${args.join(' ')} failed (cwd ${options.cwd ?? process.cwd()}):\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  }
}

function runAsync(command, args, options) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(' ')} failed (cwd ${options.cwd}):\n${output}`))));
  });
}

/** SIGTERM to a detached child's whole process group (or to the child alone). */
function stopGroup(child) {
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    child.kill('SIGTERM');
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Starts a process and resolves with it once a line of its output matches `ready`. */
async function startUntil(command, args, options, ready, timeoutMs) {
  // Its own process group: npx runs the bin in a grandchild, which must stop with it.
  const child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} ${args.join(' ')}: not ready after ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const onData = (chunk) => {
      output += chunk;
      const match = ready.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, match });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${output}`));
    });
  });
}

async function main() {
  // Verdaccio installs while the packages are packed.
  const verdaccioDir = join(work, 'verdaccio');
  mkdirSync(verdaccioDir);
  writeFileSync(join(verdaccioDir, 'package.json'), JSON.stringify({ private: true, dependencies: { verdaccio: VERDACCIO.version }, overrides: VERDACCIO.overrides }));
  const verdaccioInstalled = runAsync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: verdaccioDir });
  verdaccioInstalled.catch(() => undefined);
  // Every manifest carries its license, repository, description, keywords, README and LICENSE copy.
  console.log(run('node', [join(root, 'scripts/package-meta.mjs'), '--check']).trim());
  step('packing');
  const tarballs = join(work, 'tarballs');
  const { tarballs: packed, engineTargets } = packAll(tarballs);
  console.log(`${packed.length} tarballs: ${packed.join(', ')}`);
  const hostTarget = run('node', ['-e', `const r=process.report.getReport().header;console.log(process.platform+'-'+process.arch+(process.platform==='linux'?(r.glibcVersionRuntime?'-gnu':'-musl'):process.platform==='win32'?'-msvc':''))`]).trim();
  const expectQuic = engineTargets.includes(hostTarget);
  console.log(`engine packages: ${engineTargets.join(', ') || 'none'}; this machine: ${hostTarget}; QUIC ${expectQuic ? 'will be run' : 'will NOT be run (no engine package for this platform)'}`);

  step(`starting verdaccio ${VERDACCIO.version} on loopback`);
  await verdaccioInstalled;
  const port = await freePort();
  const registry = `http://127.0.0.1:${port}/`;
  const upstream = run('npm', ['config', 'get', 'registry']).trim() || 'https://registry.npmjs.org/';
  writeFileSync(
    join(work, 'verdaccio.yaml'),
    [
      `storage: ${join(work, 'storage')}`,
      'auth:',
      '  htpasswd:',
      `    file: ${join(work, 'htpasswd')}`,
      'uplinks:',
      '  npmjs:',
      `    url: ${upstream}`,
      'packages:',
      // Ours are served only from here (agentbench is also a name on the public registry).
      "  '@agentlink/*':",
      '    access: $all',
      '    publish: $authenticated',
      "  'agentbench':",
      '    access: $all',
      '    publish: $authenticated',
      "  '**':",
      '    access: $all',
      '    publish: $authenticated',
      '    proxy: npmjs',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  );
  const verdaccio = spawn(join(verdaccioDir, 'node_modules/.bin/verdaccio'), ['--config', join(work, 'verdaccio.yaml'), '--listen', `127.0.0.1:${port}`], {
    cwd: work,
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(verdaccio);
  // Verdaccio says little at level warn: wait until it answers (the first run downloads it).
  for (let i = 0; ; i++) {
    if (verdaccio.exitCode !== null) throw new Error(`verdaccio exited with ${verdaccio.exitCode}`);
    if (await fetch(`${registry}-/ping`).then((r) => r.ok, () => false)) break;
    if (i > 1800) throw new Error('verdaccio did not answer within 180 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const user = await fetch(`${registry}-/user/org.couchdb.user:release-check`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'release-check', password: 'release-check-password' }),
  }).then((r) => r.json());
  if (!user.token) throw new Error(`verdaccio: no token for a new user: ${JSON.stringify(user)}`);
  const npmrc = join(work, 'npmrc');
  writeFileSync(npmrc, `registry=${registry}\n//127.0.0.1:${port}/:_authToken=${user.token}\n`);
  const env = {
    ...process.env,
    PATH: pathWithoutCargo,
    npm_config_userconfig: npmrc,
    npm_config_registry: registry,
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
  delete env.npm_config_globalconfig;
  for (const key of Object.keys(env)) if (key.startsWith('npm_package_') || key === 'npm_config_node_gyp' || key === 'INIT_CWD') delete env[key];

  step('publishing');
  for (const tarball of packed) run('npm', ['publish', join(tarballs, tarball), '--tag', 'latest'], { cwd: work, env });
  console.log(`published ${packed.length} packages to ${registry}`);

  try {
    run('sh', ['-c', 'command -v cargo'], { env });
    throw new Error('cargo is still on PATH');
  } catch (error) {
    if (error.message === 'cargo is still on PATH') throw error;
  }
  const appEnv = { ...env, EXPECT_QUIC: expectQuic ? '1' : '0' };
  const deps = Object.fromEntries(['@agentlink/core', '@agentlink/ws', '@agentlink/http2', '@agentlink/quic'].map((name) => [name, '*']));
  const devDeps = { typescript: TYPESCRIPT_RANGE, '@types/node': '^20.19.0' };
  const here = fileURLToPath(new URL('./release-check/', import.meta.url));
  const compilerOptions = { target: 'ES2022', strict: true, skipLibCheck: false, types: ['node'], outDir: 'dist', noUncheckedIndexedAccess: true };

  /** A fresh app: its own directory, package.json, tsconfig(s), and a plain npm install from the registry. */
  function freshApp(app) {
    const dir = join(work, app.name);
    mkdirSync(dir);
    const manifest = { name: app.name, version: '1.0.0', private: true, ...app.manifest, dependencies: { ...deps, ...app.deps }, devDependencies: devDeps };
    writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
    for (const [file, { files, ...options }] of Object.entries(app.tsconfigs)) {
      writeFileSync(join(dir, file), JSON.stringify({ compilerOptions: { ...compilerOptions, ...options }, files: files ?? [app.out] }, null, 2));
    }
    cpSync(join(here, app.source), join(dir, app.out));
    for (const file of app.extra ?? []) cpSync(join(here, file), join(dir, file));
    return dir;
  }

  const apps = [
    // This one also calls an MCP tool through @agentlink/mcp, compiled on its own with skipLibCheck: checking the
    // SDK's and zod's declarations too doubled this app's tsc time (+12 s at load 7 on 2 cores; +5 s this way).
    {
      name: 'esm-nodenext',
      manifest: { type: 'module' },
      tsconfigs: {
        'tsconfig.json': { module: 'NodeNext', moduleResolution: 'NodeNext' },
        'tsconfig.mcp.json': { module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck: true, files: ['mcp.ts'] },
      },
      source: 'app.ts',
      out: 'app.ts',
      main: 'dist/app.js',
      deps: { '@agentlink/mcp': '*', '@modelcontextprotocol/sdk': MCP_SDK_RANGE, zod: ZOD_RANGE },
      extra: ['mcp.ts'],
      also: ['dist/mcp.js'],
    },
    { name: 'esm-bundler', manifest: { type: 'module' }, tsconfigs: { 'tsconfig.json': { module: 'ESNext', moduleResolution: 'Bundler' } }, source: 'app.ts', out: 'app.ts', main: 'dist/app.js' },
    {
      name: 'commonjs',
      manifest: { type: 'commonjs' },
      tsconfigs: {
        'tsconfig.json': { module: 'Node16', moduleResolution: 'Node16' },
        // What an older CommonJS project uses: the declarations must compile there too (typesVersions, no default imports).
        'tsconfig.commonjs.json': { module: 'CommonJS', moduleResolution: 'Node10', noEmit: true },
      },
      source: 'app.cts',
      out: 'app.cts',
      main: 'dist/app.cjs',
    },
  ];
  step(`npm install in ${apps.length} fresh apps (${apps.map((app) => app.name).join(', ')}), side by side`);
  const dirs = apps.map(freshApp);
  await Promise.all(dirs.map((dir) => runAsync('npm', ['install'], { cwd: dir, env })));
  for (const [i, app] of apps.entries()) {
    step(`app ${app.name}: tsc, run`);
    for (const tsconfig of Object.keys(app.tsconfigs)) run(join(dirs[i], 'node_modules/.bin/tsc'), ['-p', tsconfig], { cwd: dirs[i], env });
    for (const main of [app.main, ...(app.also ?? [])]) process.stdout.write(run('node', [main], { cwd: dirs[i], env: appEnv }));
  }

  step('npx agentbench --quick');
  const benchDir = join(work, 'agentbench');
  mkdirSync(benchDir);
  const bench = run('npx', ['--yes', 'agentbench', '--quick', '--md', '--svg', ''], { cwd: benchDir, env });
  const rows = bench.split('\n').filter((line) => line.startsWith('| agentlink'));
  if (rows.length === 0) throw new Error(`agentbench --quick printed no agentlink rows:\n${bench}`);
  console.log(`agentbench --quick: ${rows.length} agentlink rows, e.g.\n${rows.slice(0, 3).join('\n')}`);

  step('npx @agentlink/rendezvous, GET /healthz');
  const rdvDir = join(work, 'rendezvous');
  mkdirSync(rdvDir);
  const { child, match } = await startUntil(
    'npx',
    ['--yes', '@agentlink/rendezvous', '--host', '127.0.0.1', '--port', '0', '--stun-ports', '0,0', '--http-port', '0'],
    { cwd: rdvDir, env },
    /"httpPort":(\d+)/,
    180_000,
  );
  const health = await fetch(`http://127.0.0.1:${match[1]}/healthz`);
  const body = await health.text();
  if (health.status !== 200) throw new Error(`rendezvous /healthz answered ${health.status}: ${body}`);
  console.log(`rendezvous /healthz: ${health.status} ${body.trim().slice(0, 120)}`);
  stopGroup(child);
  await once(child, 'exit');

  console.log(`\nrelease check passed in ${((Date.now() - started) / 60_000).toFixed(1)} min (${packed.length} packages; QUIC ${expectQuic ? 'run' : 'not run'})`);
}

try {
  await main();
} catch (error) {
  console.error(`\nrelease check FAILED after ${elapsed()}: ${error.message}`);
  process.exitCode = 1;
} finally {
  for (const child of children) if (child.exitCode === null) stopGroup(child);
  if (!process.env.KEEP_RELEASE_CHECK) rmSync(work, { recursive: true, force: true });
  else console.log(`kept ${work}`);
}
// Anything still holding a pipe must not keep the check alive once it has its answer.
process.exit(process.exitCode ?? 0);
