#!/usr/bin/env node
// The Dockerfile replayer behind scripts/docker-replay.sh. It understands the instructions the rendezvous'
// Dockerfile uses (FROM, ENV, WORKDIR, COPY, RUN, VOLUME, USER, EXPOSE, HEALTHCHECK, ENTRYPOINT, CMD) and fails on
// any other, so the Dockerfile cannot drift from what CI proves. Absolute container paths (WORKDIR, VOLUME, COPY
// destinations) are mapped into a temporary directory; `chown <user>` maps the image's user to one that exists
// here (nobody when root, else the current user); RUN lines run with cargo off PATH.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { createSocket } from 'node:dgram';
import { tmpdir, userInfo } from 'node:os';
import { delimiter, join } from 'node:path';

const started = Date.now();
const dockerfile = process.argv[2];
const context = process.cwd();
const root = mkdtempSync(join(tmpdir(), 'agentlink-image-'));
chmodSync(root, 0o755); // an image's root is readable by its users (mkdtemp made it 0700)
const lines = readFileSync(dockerfile, 'utf8')
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line && !line.startsWith('#'));
const instructions = lines.map((line) => {
  const [, keyword, rest] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
  if (!keyword) throw new Error(`cannot read Dockerfile line: ${line}`);
  return { keyword: keyword.toUpperCase(), rest };
});

// Container roots: every absolute directory the image names; their paths are mapped under `root`.
const containerRoots = new Set();
for (const { keyword, rest } of instructions) {
  if (keyword === 'WORKDIR' || keyword === 'VOLUME') containerRoots.add(rest.trim());
  if (keyword === 'COPY') containerRoots.add(rest.trim().split(/\s+/).pop().replace(/\/$/, ''));
}
const rootsPattern = new RegExp(`(?<![\\w./-])(${[...containerRoots].map((r) => r.replace(/[/.]/g, '\\$&')).join('|')})(?=[/\\s"';]|$)`, 'g');
const mapPaths = (text) => text.replace(rootsPattern, (path) => join(root, path));

const isRoot = process.getuid?.() === 0;
const serviceUser = isRoot ? { name: 'nobody', uid: 65534, gid: 65534 } : { name: userInfo().username, uid: process.getuid(), gid: process.getgid() };
const pathWithoutCargo = process.env.PATH.split(delimiter).filter((dir) => !existsSync(join(dir, 'cargo'))).join(delimiter);
// The host's environment carries what reaching the npm registry needs here (proxy, npm config), as a build's
// network settings would; PATH loses cargo.
const env = { ...process.env, PATH: pathWithoutCargo };
let workdir = '/';
let user;
let entrypoint = [];
let cmd = [];
let healthcheck;
const log = (text) => console.log(`[replay ${((Date.now() - started) / 1000).toFixed(0)} s] ${text}`);

/** The .dockerignore of the context: `*` then `!path/` exceptions (the only shape this repository uses). */
const allowed = readFileSync(join(context, '.dockerignore'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line.startsWith('!'))
  .map((line) => line.slice(1).replace(/\/$/, ''));

for (const { keyword, rest } of instructions) {
  switch (keyword) {
    case 'FROM': {
      const major = /^node:(\d+)/.exec(rest)?.[1];
      if (!major) throw new Error(`FROM ${rest}: the replay stands in for node images only`);
      log(`FROM ${rest}: replayed on Node ${process.versions.node}${process.versions.node.split('.')[0] === major ? '' : ' (a different major: WARNING)'}`);
      break;
    }
    case 'ENV':
      for (const [, key, value] of rest.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[key] = mapPaths(value.replace(/^"|"$/g, ''));
      break;
    case 'WORKDIR':
      workdir = rest.trim();
      mkdirSync(join(root, workdir), { recursive: true });
      break;
    case 'COPY': {
      const parts = rest.trim().split(/\s+/);
      const destination = parts.pop();
      for (const source of parts) {
        if (!allowed.some((entry) => source.replace(/\/$/, '') === entry || source.startsWith(`${entry}/`))) throw new Error(`COPY ${source}: excluded by .dockerignore`);
        const target = destination.startsWith('/') ? join(root, destination) : join(root, workdir, destination);
        cpSync(join(context, source), target, { recursive: true });
        log(`COPY ${source} -> ${destination}`);
      }
      break;
    }
    case 'RUN': {
      const script = mapPaths(rest).replace(/\bchown\s+(\w+):(\w+)/g, () => `chown ${serviceUser.uid}:${serviceUser.gid}`);
      log(`RUN ${rest.slice(0, 100)}${rest.length > 100 ? '…' : ''}`);
      execFileSync('sh', ['-c', script], { cwd: join(root, workdir), env, stdio: 'inherit' });
      break;
    }
    case 'VOLUME':
      if (!existsSync(join(root, rest.trim()))) throw new Error(`VOLUME ${rest}: no directory made for it before`);
      break;
    case 'USER':
      user = rest.trim();
      break;
    case 'EXPOSE':
      break;
    case 'HEALTHCHECK':
      healthcheck = JSON.parse(/CMD\s+(\[.*\])\s*$/.exec(rest)?.[1] ?? 'null');
      break;
    case 'ENTRYPOINT':
      entrypoint = JSON.parse(rest).map(mapPaths);
      break;
    case 'CMD':
      cmd = JSON.parse(rest).map(mapPaths);
      break;
    default:
      throw new Error(`${keyword}: not understood by the replay (extend scripts/docker-replay.mjs)`);
  }
}
if (!user || user === 'root') throw new Error('the image must run as a non-root USER');
if (!healthcheck) throw new Error('the image has no HEALTHCHECK');
const volume = instructions.find((i) => i.keyword === 'VOLUME')?.rest.trim();
if (statSync(join(root, volume)).uid !== serviceUser.uid) throw new Error(`VOLUME ${volume} is not owned by the service user`);
log(`built in ${root}; USER ${user} runs as ${serviceUser.name}; volume ${volume} owned by it`);

function freeTcpPort() {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
function freeUdpPort() {
  return new Promise((resolve) => {
    const socket = createSocket('udp4').bind(0, '127.0.0.1', () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });
}
const runEnv = {
  ...env,
  RENDEZVOUS_HOST: '127.0.0.1',
  RENDEZVOUS_PORT: String(await freeTcpPort()),
  RENDEZVOUS_STUN_PORTS: `${await freeUdpPort()},${await freeUdpPort()}`,
  RENDEZVOUS_HTTP_PORT: String(await freeTcpPort()),
};
const asUser = (argv) => (isRoot ? ['setpriv', `--reuid=${serviceUser.uid}`, `--regid=${serviceUser.gid}`, '--clear-groups', ...argv] : argv);
const [command, ...args] = asUser([...entrypoint, ...cmd]);
const service = spawn(command, args, { cwd: join(root, workdir), env: runEnv, stdio: ['ignore', 'pipe', 'inherit'] });
let output = '';
try {
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service printed no address in 60 s: ${output}`)), 60_000);
    service.stdout.on('data', (chunk) => {
      output += chunk;
      if (output.includes('"httpPort"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    service.on('exit', (code) => reject(new Error(`the service exited with ${code}: ${output}`)));
  });
  log(`ENTRYPOINT started as ${serviceUser.name}: ${output.trim()}`);
  const [hcCommand, ...hcArgs] = asUser(healthcheck);
  execFileSync(hcCommand, hcArgs, { cwd: join(root, workdir), env: runEnv, stdio: 'inherit' });
  log('HEALTHCHECK passed');
  const keyFile = runEnv.RENDEZVOUS_KEY_FILE;
  if (!existsSync(keyFile) || statSync(keyFile).uid !== serviceUser.uid) throw new Error(`no key file owned by the service user at ${keyFile}`);
  log(`key file created in the volume by ${serviceUser.name} (mode ${(statSync(keyFile).mode & 0o777).toString(8)})`);
  // A connection to the agent port proves it listens there too.
  await new Promise((resolve, reject) => createConnection(Number(runEnv.RENDEZVOUS_PORT), '127.0.0.1').on('connect', function () { this.destroy(); resolve(); }).on('error', reject));
} finally {
  service.kill('SIGTERM');
}
const code = await new Promise((resolve) => (service.exitCode !== null ? resolve(service.exitCode) : service.on('exit', (c) => resolve(c))));
log(`SIGTERM: exited with ${code}`);
rmSync(root, { recursive: true, force: true });
if (code !== 0) process.exit(1);
log(`image replay passed in ${((Date.now() - started) / 60_000).toFixed(1)} min`);
