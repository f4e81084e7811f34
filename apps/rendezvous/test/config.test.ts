import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentError, Identity } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllowList } from '../src/allow-list.js';
import { DEFAULT_CONFIG, configFrom, listenerLimits } from '../src/config.js';
import { startRendezvous } from '../src/index.js';
import { cleanup } from './helpers.js';

afterEach(cleanup);

/** A UDP port the OS just handed out (free again when this resolves). */
async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(resolve));
  return port;
}

function thrown(run: () => unknown): AgentError {
  try {
    run();
  } catch (error) {
    return error as AgentError;
  }
  throw new Error('expected an error');
}

describe('rendezvous configuration', () => {
  it('takes two STUN ports and refuses anything else with a message naming the setting', () => {
    expect(configFrom(['--stun-ports', '3480, 3481'], {}).stunPorts).toEqual([3480, 3481]);
    expect(configFrom([], { RENDEZVOUS_STUN_PORTS: '0,0' }).stunPorts).toEqual([0, 0]);
    for (const bad of ['3478', '3478,3479,3480', 'abc,def', '3478,', '70000,3479', '-1,3479', '']) {
      const error = thrown(() => configFrom([`--stun-ports=${bad}`], {}));
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('--stun-ports must be two UDP ports') });
    }
    expect(thrown(() => configFrom([], { RENDEZVOUS_STUN_PORTS: '3478' })).message).toMatch(/^RENDEZVOUS_STUN_PORTS must be two UDP ports/);
    expect(thrown(() => configFrom(['--stun-ports', '3478,3478'], {})).message).toMatch(/two different ports/);
  });

  it('keeps the registry in memory unless a redis:// URL is given (flag or environment), and refuses other URLs', async () => {
    expect(configFrom([], {})).toMatchObject({ redisUrl: undefined, redisPrefix: 'agentlink:' });
    expect(configFrom(['--redis-url', 'redis://valkey:6379', '--redis-prefix', 'eu:'], {})).toMatchObject({ redisUrl: 'redis://valkey:6379', redisPrefix: 'eu:' });
    expect(configFrom([], { RENDEZVOUS_REDIS_URL: 'rediss://valkey:6380' }).redisUrl).toBe('rediss://valkey:6380');
    for (const bad of ['http://valkey:6379', 'valkey:6379x', 'not a url']) {
      expect(thrown(() => configFrom(['--redis-url', bad], {}))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^--redis-url must be a redis/) });
    }
    expect(thrown(() => configFrom([], { RENDEZVOUS_REDIS_URL: 'valkey:6379' })).message).toMatch(/^RENDEZVOUS_REDIS_URL must be a redis/);
    expect(thrown(() => configFrom(['--redis-prefix', 'x'.repeat(65)], {})).message).toMatch(/^--redis-prefix must be a string of at most 64/);
    // A Redis that does not answer stops the start with UNAVAILABLE, leaving nothing open.
    await expect(startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: -1, redisUrl: 'redis://127.0.0.1:1' })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('refuses non-integers, out-of-range ports, unknown flags and non-positive limits', () => {
    expect(thrown(() => configFrom(['--port', '44x'], {})).message).toMatch(/--port must be an integer/);
    expect(thrown(() => configFrom(['--port', ''], {})).message).toMatch(/--port must be an integer/);
    // The setting is named as the operator gave it (until 2026-11-24, as code names it: `maxRegistrations`).
    expect(thrown(() => configFrom(['--port', '65536'], {})).message).toBe('--port must be 0-65535, got 65536');
    expect(thrown(() => configFrom([], { RENDEZVOUS_HTTP_PORT: '70000' })).message).toBe('RENDEZVOUS_HTTP_PORT must be 0-65535 or -1 (off), got 70000');
    expect(thrown(() => configFrom(['--max-registrations', '0'], {})).message).toBe('--max-registrations must be a positive integer, got 0');
    expect(thrown(() => configFrom([], { RENDEZVOUS_RELAY_BYTES_PER_SECOND: '0' })).message).toMatch(/^RENDEZVOUS_RELAY_BYTES_PER_SECOND must be a positive integer/);
    expect(thrown(() => configFrom(['--prot', '1'], {})).message).toMatch(/Unknown option '--prot'/);
    expect(thrown(() => configFrom(['--stun-requests-per-second', '0'], {})).message).toMatch(/^--stun-requests-per-second must be a positive integer/);
    expect(configFrom(['--stun-requests-per-second', '7'], {}).stunRequestsPerSecondPerIp).toBe(7);
  });

  it('rejects a bad configuration from code before opening any port', async () => {
    await expect(startRendezvous({ stunPorts: [1, 2, 3] as unknown as [number, number] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/stunPorts/) });
    await expect(startRendezvous({ maxConnectionsPerIp: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/maxConnectionsPerIp/) });
  });

  it('a STUN port in use stops the start with UNAVAILABLE naming it (the ports already bound are closed again)', async () => {
    const taken = createSocket('udp4');
    await new Promise<void>((resolve) => taken.bind(0, '127.0.0.1', resolve));
    const port = taken.address().port;
    await expect(startRendezvous({ host: '127.0.0.1', port: 0, httpPort: -1, stunPorts: [0, port] })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: `the STUN port (--stun-ports) 127.0.0.1:${port} is in use (another rendezvous, or the previous one still stopping)`,
    });
    taken.close();
  });

  it('a wss or HTTP port in use stops the start with UNAVAILABLE naming it, and leaves nothing open', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      await expect(startRendezvous({ host: '127.0.0.1', port, httpPort: -1, stunPorts: [0, 0] })).rejects.toMatchObject({
        code: 'UNAVAILABLE',
        message: `the wss port (--port) 127.0.0.1:${port} is in use (another rendezvous, or the previous one still stopping)`,
      });
      // Before 2026-11-24 an HTTP port in use was an unhandled 'error' event: the process died, whoever started it.
      const stunPort = await freeUdpPort();
      await expect(startRendezvous({ host: '127.0.0.1', port: 0, httpPort: port, stunPorts: [stunPort, 0] })).rejects.toMatchObject({
        code: 'UNAVAILABLE',
        message: `the HTTP port (--http-port) 127.0.0.1:${port} is in use (another rendezvous, or the previous one still stopping)`,
      });
      // The STUN port it had bound was closed again: a start on it succeeds.
      const r = await startRendezvous({ host: '127.0.0.1', port: 0, httpPort: -1, stunPorts: [stunPort, 0] });
      await r.close();
    } finally {
      taken.close();
    }
  });

  it('the process says a port in use in one line and exits 1 (a supervisor may start it again)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
      const args = ['--conditions=source', '--import', 'tsx', main, '--host', '127.0.0.1', '--port', '0', '--stun-ports', '0,0', '--http-port', String(port)];
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const [code] = (await once(child, 'exit')) as [number];
      expect(stderr.trim()).toBe(`agentlink-rendezvous: the HTTP port (--http-port) 127.0.0.1:${port} is in use (another rendezvous, or the previous one still stopping)`);
      expect(code).toBe(1);
    } finally {
      taken.close();
    }
  });

  it("gives the wss listener core's ListenerLimits from its settings", () => {
    expect(listenerLimits({ ...DEFAULT_CONFIG, maxConnections: 100, maxConnectionsPerIp: 10, connectionsPerSecondPerIp: 3, handshakeTimeoutMs: 2000 })).toEqual({
      maxConnections: 100,
      maxConnectionsPerIp: 10,
      newConnectionsPerIpPerSecond: 3,
      handshakeTimeoutMs: 2000,
    });
    // Every registered agent holds its control connection: room for every registration, in all and per IP.
    expect(listenerLimits(DEFAULT_CONFIG)).toEqual({
      maxConnections: DEFAULT_CONFIG.maxRegistrations,
      maxConnectionsPerIp: DEFAULT_CONFIG.maxRegistrationsPerIp,
      newConnectionsPerIpPerSecond: 20,
      handshakeTimeoutMs: 5000,
    });
  });

  it("sets every per-IP bound a fleet behind one address meets from a flag or a variable, and connections follow registrations", () => {
    // A datacenter's fleet behind one NAT is one client to every per-IP bound: its operator raises them without code.
    const config = configFrom(
      ['--max-registrations-per-ip', '5000', '--registrations-per-second-per-ip', '400', '--connections-per-second-per-ip', '300', '--max-relays-per-ip', '500'],
      { RENDEZVOUS_REQUESTS_PER_SECOND_PER_IP: '900', RENDEZVOUS_MAX_RELAYS: '4000' },
    );
    expect(config).toMatchObject({
      maxRegistrationsPerIp: 5000,
      registrationsPerSecondPerIp: 400,
      connectionsPerSecondPerIp: 300,
      requestsPerSecondPerIp: 900,
      maxRelaysPerIp: 500,
      maxRelays: 4000,
      // Each registered agent holds its control connection: 5,000 agents need 5,000 connections from that address.
      maxConnectionsPerIp: 5000,
    });
    expect(listenerLimits(config)).toMatchObject({ maxConnectionsPerIp: 5000, newConnectionsPerIpPerSecond: 300 });
    expect(configFrom(['--max-registrations', '200000'], {}).maxConnections).toBe(200_000);
    // Given both, each keeps its own; lowered registrations keep the default connections.
    expect(configFrom(['--max-registrations-per-ip', '5000', '--max-connections-per-ip', '6000'], {}).maxConnectionsPerIp).toBe(6000);
    expect(configFrom(['--max-registrations-per-ip', '10'], {}).maxConnectionsPerIp).toBe(DEFAULT_CONFIG.maxConnectionsPerIp);
    expect(thrown(() => configFrom([], { RENDEZVOUS_REGISTRATIONS_PER_SECOND_PER_IP: '0' })).message).toBe('RENDEZVOUS_REGISTRATIONS_PER_SECOND_PER_IP must be a positive integer, got 0');
    expect(thrown(() => configFrom(['--max-connections-per-ip', 'many'], {})).message).toBe('--max-connections-per-ip must be an integer, got "many"');
    expect(thrown(() => configFrom(['--max-connections-per-ip', '0'], {})).message).toBe('--max-connections-per-ip must be a positive integer, got 0');
  });

  it('startRendezvous() lets connections follow registrations as the flags do', async () => {
    const r = await startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: -1, maxRegistrationsPerIp: 3000 });
    try {
      expect(r.config.maxConnectionsPerIp).toBe(3000);
    } finally {
      await r.close();
    }
  });

  it('reads --allow-agents: one AgentId a line, comments and blanks ignored, a bad line named', () => {
    const [a, b] = [Identity.generate().id, Identity.generate().id];
    const dir = mkdtempSync(join(tmpdir(), 'rdv-allow-'));
    const file = join(dir, 'agents.txt');
    writeFileSync(file, `# our agents\n${a}\n\n  ${b.toUpperCase()}  # shouting is fine\n${a}\n`);
    expect(configFrom(['--allow-agents', file], {}).allowAgents).toEqual([a, b]);
    expect(thrown(() => parseAllowList(`${a}\nnot-an-agent\n`, 'agents.txt')).message).toMatch(/^agents\.txt:2: "not-an-agent" is not an AgentId/);
    expect(thrown(() => parseAllowList('# nobody\n', 'agents.txt')).message).toMatch(/lists no AgentId/);
    expect(thrown(() => configFrom(['--allow-agents', join(dir, 'missing.txt')], {})).message).toMatch(/cannot read the allow list/);
    expect(configFrom([], {}).allowAgents).toBeUndefined();
  });

  it('the process says what is wrong in one line and exits 2 (no stack trace)', async () => {
    const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main, '--stun-ports', '3478'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(2);
    expect(stderr.trim()).toBe('agentlink-rendezvous: --stun-ports must be two UDP ports separated by a comma, e.g. 3478,3479 (0 = any); got "3478"');
  });
});
