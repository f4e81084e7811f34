// A fleet of agents on one rendezvous (in memory, no Redis), from the packed tarballs: see benchmarks/fleet/README.md.
//   node fleet.mjs scale   '{"steps":[500,1000,2000],"perProcess":500,"ips":20}'
//   node fleet.mjs restart '{"agents":1000,"perProcess":500,"ips":1,"downMs":5000}'
//   node fleet.mjs relay   '{"pairs":50,"bytes":8388608}'
// Prints JSON lines: one per measurement. Rendezvous CPU and RSS come from /proc/<pid>; its counters from /metrics.
import { fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, realpathSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [mode = 'scale', json = '{}'] = process.argv.slice(2);
const opts = JSON.parse(json);
const HEARTBEAT_MS = opts.heartbeatMs ?? 15_000;
const out = (record) => console.log(JSON.stringify({ mode, load: loadavg().map((l) => +l.toFixed(2)), ...record }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort() {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  return port;
}

const keyFile = join(mkdtempSync(join(tmpdir(), 'fleet-')), 'rendezvous.key');
const ports = { port: await freePort(), stun: [await freePort(), await freePort()], http: await freePort() };
const bin = realpathSync(join(here, 'node_modules/.bin/agentlink-rendezvous'));
let rdv;
let rdvStderr = [];

async function startRendezvous(extra = []) {
  const child = spawn(
    process.execPath,
    [bin, '--host', '127.0.0.1', '--port', String(ports.port), '--stun-ports', ports.stun.join(','), '--http-port', String(ports.http), '--key-file', keyFile, ...extra, ...(opts.flags ?? [])],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let buffer = '';
  const lines = { registered: 0, other: new Map() };
  const address = await new Promise((resolve, reject) => {
    child.stdout.on('data', (data) => {
      buffer += data;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const parsed = JSON.parse(line);
          if (parsed.address && !parsed.message) resolve(parsed.address);
          if (parsed.message === 'registered') lines.registered++;
          else if (parsed.message) lines.other.set(`${parsed.level} ${parsed.message}${parsed.reason ? ` (${parsed.reason})` : ''}`, (lines.other.get(`${parsed.level} ${parsed.message}${parsed.reason ? ` (${parsed.reason})` : ''}`) ?? 0) + 1);
        } catch {
          lines.other.set(line.slice(0, 80), (lines.other.get(line.slice(0, 80)) ?? 0) + 1);
        }
      }
    });
    child.stderr.on('data', (data) => {
      rdvStderr.push(String(data));
      for (const line of String(data).split('\n')) {
        try {
          const parsed = JSON.parse(line);
          const key = `${parsed.level} ${parsed.message}${parsed.reason ? ` (${parsed.reason})` : ''}`;
          lines.other.set(key, (lines.other.get(key) ?? 0) + 1);
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`rendezvous exited ${code}: ${rdvStderr.join('')}`)));
  });
  rdv = { child, address, lines, startedAt: Date.now() };
  return rdv;
}

/** utime+stime in seconds and RSS in MiB of the rendezvous process. */
function usage(pid = rdv.child.pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpu = (Number(fields[11]) + Number(fields[12])) / 100;
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  return { cpu, rss };
}

async function metrics() {
  const text = await (await fetch(`http://127.0.0.1:${ports.http}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const at = line.lastIndexOf(' ');
    values[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return values;
}
const pick = (m, prefix) => Object.fromEntries(Object.entries(m).filter(([k, v]) => k.startsWith(prefix) && v !== 0));

/** The fleet's processes; `registrations[i]` is every registration time of agent i (global index). */
const processes = [];
const lastRegistered = [];
/** The first registration of each agent after `since` (the restart), once it is set. */
const firstAfter = [];
let since = Infinity;
const errors = new Map();
function startProcess({ count, ips, relayOnly = false }) {
  const base = lastRegistered.length;
  for (let i = 0; i < count; i++) lastRegistered.push(0);
  const child = fork(join(here, 'fleet-agents.mjs'), [JSON.stringify({ rendezvous: rdv.address, count, heartbeatMs: HEARTBEAT_MS, ips, relayOnly, startConcurrency: opts.startConcurrency ?? 8 })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const p = { child, base, count, ids: [], waiting: new Map(), seq: 0 };
  child.on('message', (m) => {
    if (m.t === 'registered') {
      lastRegistered[base + m.i] = m.at;
      if (m.at >= since && firstAfter[base + m.i] === undefined) firstAfter[base + m.i] = m.at;
    }
    if (m.t === 'error') {
      const key = `${m.code}: ${m.message.replace(/[0-9a-zA-Z_-]{43}/g, '<id>').replace(/:\d+/g, ':<port>').replace(/\d+(\.\d+)? ?ms/g, 'N ms')}`;
      errors.set(key, (errors.get(key) ?? 0) + 1);
    }
    if (m.t === 'done') {
      p.waiting.get(m.id)?.(m.results);
      p.waiting.delete(m.id);
    }
  });
  p.up = new Promise((resolve) => child.on('message', (m) => m.t === 'up' && resolve((p.ids = m.ids, m.ms))));
  p.ask = (message) =>
    new Promise((resolve) => {
      const id = ++p.seq;
      p.waiting.set(id, resolve);
      child.send({ ...message, id });
    });
  processes.push(p);
  return p;
}
const ipsFor = (n, offset) => Array.from({ length: n }, (_, k) => `127.0.${1 + Math.floor((offset + k) / 250)}.${1 + ((offset + k) % 250)}`);
const takeErrors = () => {
  const copy = Object.fromEntries([...errors].sort((a, b) => b[1] - a[1]).slice(0, 12));
  errors.clear();
  return copy;
};
const percentile = (sorted, p) => (sorted.length === 0 ? undefined : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);
function summary(results) {
  const ok = results.filter((r) => r.ok).map((r) => r.ms).sort((a, b) => a - b);
  const failed = {};
  for (const r of results.filter((r) => !r.ok)) {
    const key = `${r.code}: ${r.message.replace(/[0-9a-zA-Z_-]{43}/g, '<id>').replace(/\d+(\.\d+)? ?ms/g, 'N ms')}`;
    failed[key] = (failed[key] ?? 0) + 1;
  }
  const paths = {};
  for (const r of results.filter((r) => r.ok)) paths[r.path] = (paths[r.path] ?? 0) + 1;
  const round = (x) => (x === undefined ? undefined : Math.round(x));
  return { ok: ok.length, failed, paths, p50: round(percentile(ok, 0.5)), p99: round(percentile(ok, 0.99)), max: round(ok.at(-1)), slowestFailMs: round(Math.max(0, ...results.filter((r) => !r.ok).map((r) => r.ms))) };
}
/** Calls from random agents of each process to random agents of the others: `n` per process. */
async function crossCalls(n, timeoutMs = 10_000, again = undefined) {
  const jobs = processes.map((p, k) => {
    const others = processes.filter((_, j) => j !== k || processes.length === 1);
    const pairs =
      again?.[k] ??
      Array.from({ length: n }, () => {
        const q = others[Math.floor(Math.random() * others.length)];
        return [Math.floor(Math.random() * p.count), q.ids[Math.floor(Math.random() * q.count)]];
      });
    p.lastPairs = pairs;
    return p.ask({ t: 'call', pairs, timeoutMs });
  });
  return (await Promise.all(jobs)).flat();
}

async function steadyWindow(seconds) {
  const m0 = await metrics();
  const u0 = usage();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const m1 = await metrics();
  const u1 = usage();
  const dt = (performance.now() - t0) / 1000;
  const heartbeats = m1['rendezvous_registrations_total{kind="heartbeat"}'] - m0['rendezvous_registrations_total{kind="heartbeat"}'];
  const served = (m) => Object.entries(m).filter(([k]) => k.startsWith('agentlink_served_calls_total')).reduce((s, [, v]) => s + v, 0);
  return {
    seconds: +dt.toFixed(1),
    cpuPct: +((100 * (u1.cpu - u0.cpu)) / dt).toFixed(1),
    heartbeatsPerS: +(heartbeats / dt).toFixed(1),
    servedCallsPerS: +((served(m1) - served(m0)) / dt).toFixed(1),
    cpuMsPerHeartbeat: heartbeats > 0 ? +((1000 * (u1.cpu - u0.cpu)) / heartbeats).toFixed(2) : undefined,
    rssMiB: +u1.rss.toFixed(1),
  };
}

async function closeAll() {
  for (const p of processes) p.child.send({ t: 'close' });
  await Promise.all(processes.map((p) => once(p.child, 'exit')));
  rdv.child.kill('SIGTERM');
  await once(rdv.child, 'exit');
}

if (mode === 'scale') {
  await startRendezvous();
  await sleep(1000);
  const base = usage();
  out({ agents: 0, rssMiB: +base.rss.toFixed(1), cpuS: base.cpu });
  const perProcess = opts.perProcess ?? 500;
  let ipOffset = 0;
  for (const step of opts.steps ?? [500, 1000, 2000]) {
    const t0 = performance.now();
    const before = usage();
    const starting = [];
    while (lastRegistered.length < step) {
      const count = Math.min(perProcess, step - lastRegistered.length);
      const ips = ipsFor(opts.ips ?? 20, ipOffset);
      ipOffset += ips.length;
      starting.push(startProcess({ count, ips }).up);
    }
    await Promise.all(starting);
    const rampS = (performance.now() - t0) / 1000;
    const after = usage();
    const m = await metrics();
    out({ agents: step, phase: 'registered', rampS: +rampS.toFixed(1), rdvCpuS: +(after.cpu - before.cpu).toFixed(1), registered: m.rendezvous_registered_agents, errors: takeErrors(), rejected: pick(m, 'rendezvous_rejected_total'), refusals: pick(m, 'agentlink_refusals_total') });
    // Let the ramp's own heartbeats spread, then a steady window of two heartbeats.
    await sleep(3000);
    global.gc?.();
    const steady = await steadyWindow((2 * HEARTBEAT_MS) / 1000);
    out({ agents: step, phase: 'steady', ...steady, rssPerAgentKiB: +(((steady.rssMiB - base.rss) * 1024) / step).toFixed(1), errors: takeErrors() });
    // Resolve: each process calls random agents of the others by bare AgentId (lookup + direct QUIC dial).
    const u0 = usage();
    const m0 = await metrics();
    const t1 = performance.now();
    const results = await crossCalls(opts.calls ?? 200);
    const dt = (performance.now() - t1) / 1000;
    const m1 = await metrics();
    out({ agents: step, phase: 'resolve', calls: results.length, seconds: +dt.toFixed(1), lookups: m1.rendezvous_lookups_total - m0.rendezvous_lookups_total, lookupsPerS: +((m1.rendezvous_lookups_total - m0.rendezvous_lookups_total) / dt).toFixed(0), rdvCpuS: +(usage().cpu - u0.cpu).toFixed(2), ...summary(results) });
  }
  await closeAll();
}

if (mode === 'restart') {
  await startRendezvous();
  const perProcess = opts.perProcess ?? 500;
  const ips = opts.ips ?? 1;
  const t0 = performance.now();
  let ipOffset = 0;
  const starting = [];
  for (let n = 0; n < opts.agents; n += perProcess) {
    const list = ipsFor(ips, ips === 1 ? 0 : ipOffset);
    ipOffset += list.length;
    starting.push(startProcess({ count: Math.min(perProcess, opts.agents - n), ips: list }).up);
  }
  await Promise.all(starting);
  let m = await metrics();
  out({ phase: 'up', agents: opts.agents, ips, rampS: +((performance.now() - t0) / 1000).toFixed(1), registered: m.rendezvous_registered_agents, errors: takeErrors(), rejected: pick(m, 'rendezvous_rejected_total'), refusals: pick(m, 'agentlink_refusals_total') });
  // A direct channel between some pairs before the outage.
  const warm = await crossCalls(20);
  const warmPairs = processes.map((p) => p.lastPairs);
  out({ phase: 'warm calls', ...summary(warm) });
  // A heartbeat round with the fleet registered: does every agent keep its record?
  await sleep(HEARTBEAT_MS * 2);
  m = await metrics();
  const staleBefore = lastRegistered.filter((at) => at < Date.now() - HEARTBEAT_MS * 1.5).length;
  out({ phase: 'steady', registered: m.rendezvous_registered_agents, staleAgents: staleBefore, errors: takeErrors(), rejected: pick(m, 'rendezvous_rejected_total'), refusals: pick(m, 'agentlink_refusals_total'), stun: pick(m, 'rendezvous_stun_datagrams_total') });

  // The restart: SIGTERM, down for downMs, the same key and ports again.
  const stoppedAt = Date.now();
  rdv.child.kill('SIGTERM');
  const [exitCode] = await once(rdv.child, 'exit');
  out({ phase: 'stopped', exitMs: Date.now() - stoppedAt, exitCode });
  // Pairs that called before hold a direct channel: the outage must not touch them. New pairs need a lookup.
  const warmDuring = await crossCalls(0, 5000, warmPairs);
  out({ phase: 'warm pairs during outage', ...summary(warmDuring) });
  const duringOutage = crossCalls(10, 5000);
  await sleep(opts.downMs ?? 5000);
  const outage = await duringOutage;
  out({ phase: 'new pairs during outage', ...summary(outage) });
  rdvStderr = [];
  const restarted = await startRendezvous();
  const upAt = Date.now();
  since = upAt;
  out({ phase: 'restarted', downMs: upAt - stoppedAt });
  const timeline = [];
  const deadline = upAt + (opts.watchMs ?? HEARTBEAT_MS * 8);
  while (Date.now() < deadline) {
    await sleep(1000);
    const back = lastRegistered.filter((at) => at >= upAt).length;
    m = await metrics();
    timeline.push([Math.round((Date.now() - upAt) / 1000), back, m.rendezvous_registered_agents]);
    if (back === lastRegistered.length) break;
  }
  const backTimes = firstAfter.filter((at) => at !== undefined).map((at) => at - upAt).sort((a, b) => a - b);
  m = await metrics();
  out({
    phase: 'back',
    agents: lastRegistered.length,
    back: backTimes.length,
    p10Ms: percentile(backTimes, 0.1),
    p50Ms: percentile(backTimes, 0.5),
    p90Ms: percentile(backTimes, 0.9),
    p99Ms: percentile(backTimes, 0.99),
    maxMs: backTimes.at(-1),
    timeline: timeline.filter((_, k) => k % 2 === 0 || k === timeline.length - 1),
    errors: takeErrors(),
    rejected: pick(m, 'rendezvous_rejected_total'),
    refusals: pick(m, 'agentlink_refusals_total'),
    stun: pick(m, 'rendezvous_stun_datagrams_total'),
    logLines: { registered: restarted.lines.registered, ...Object.fromEntries(restarted.lines.other) },
    stderr: rdvStderr.join('').slice(0, 600),
  });
  const after = await crossCalls(20);
  out({ phase: 'calls after', ...summary(after) });
  await closeAll();
}

if (mode === 'relay') {
  // Two processes of relay-only agents (on two IPs); `pairs` calls, each streaming `bytes` through the relay at once.
  await startRendezvous();
  const pairs = opts.pairs ?? 50;
  const a = startProcess({ count: pairs, ips: ipsFor(opts.ips ?? 8, 0), relayOnly: true });
  const b = startProcess({ count: pairs, ips: ipsFor(opts.ips ?? 8, 100), relayOnly: true });
  await Promise.all([a.up, b.up]);
  const u0 = usage();
  const warm = await a.ask({ t: 'call', pairs: Array.from({ length: pairs }, (_, i) => [i, b.ids[i]]), timeoutMs: 20_000 });
  out({ phase: 'relays opened', ...summary(warm), relays: (await metrics()).rendezvous_relays_active, rssMiB: +usage().rss.toFixed(1) });
  let peakRss = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, usage().rss)), 200);
  const t0 = performance.now();
  const m0 = await metrics();
  const results = await a.ask({ t: 'stream', pairs: Array.from({ length: pairs }, (_, i) => [i, b.ids[i]]), bytes: opts.bytes ?? 8 * 1024 * 1024 });
  const dt = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const m1 = await metrics();
  const u1 = usage();
  const mibps = results.filter((r) => r.ok).map((r) => r.bytes / 1048576 / (r.ms / 1000)).sort((x, y) => x - y);
  out({
    phase: 'relay streams',
    pairs,
    seconds: +dt.toFixed(1),
    totalMiBps: +((m1.rendezvous_relay_bytes_total - m0.rendezvous_relay_bytes_total) / 1048576 / dt).toFixed(1),
    perPairMiBps: { min: +mibps[0]?.toFixed(2), p50: +percentile(mibps, 0.5)?.toFixed(2), max: +mibps.at(-1)?.toFixed(2) },
    rdvCpuPct: +((100 * (u1.cpu - u0.cpu)) / dt).toFixed(0),
    peakRssMiB: +peakRss.toFixed(1),
    ...summary(results),
    rejected: pick(m1, 'rendezvous_rejected_total'),
  });
  await closeAll();
}
