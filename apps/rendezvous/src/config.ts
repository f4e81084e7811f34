import { parseArgs } from 'node:util';
import { AgentError, DEFAULT_LISTENER_LIMITS, isAgentId, type AgentId, type ListenerLimits } from '@agentlink/core';
import { resolveListenerLimits } from '@agentlink/core/transport';
import { readAllowList } from './allow-list.js';

export interface RendezvousConfig {
  /** Address the control WebSocket, STUN and HTTP listen on (default 0.0.0.0). */
  host: string;
  /** Control WebSocket (wss) port (default 4433; 0 = any). */
  port: number;
  /** The two STUN ports (default 3478 and 3479; 0 = any). */
  stunPorts: [number, number];
  /** HTTP port for /healthz and /metrics (default 9090; 0 = any; -1 = off). */
  httpPort: number;
  /** Hostname agents should use for STUN when it differs from the control URL's (e.g. behind a load balancer). */
  publicHost: string | undefined;
  /** Key file of the rendezvous' own identity (created at 0600 if missing); unset = a new key each start. */
  keyFile: string | undefined;
  /** Longest record lifetime accepted, ms (default 120 s). */
  maxRecordTtlMs: number;
  /** Registrations stored at most (default 100,000). */
  maxRegistrations: number;
  /** New registrations one IP may hold (default 1,000). */
  maxRegistrationsPerIp: number;
  /** New TCP connections per second per IP, sustained (default 20; burst 2×); refused before TLS. */
  connectionsPerSecondPerIp: number;
  /**
   * Registrations (heartbeats included) per second per IP, sustained (default 100; burst 2×). An agent registers once
   * a heartbeat (15 s): the `maxRegistrationsPerIp` agents one address may hold need 67 a second. Until 2026-11-25
   * it was 20, enough for 300 agents: behind one address, a fleet of 1,000 had its heartbeats refused, its records
   * expired, and 514 of 1,000 were registered after two minutes (benchmarks/fleet, docs/rendezvous.md).
   */
  registrationsPerSecondPerIp: number;
  /** Lookups, routes, punch and relay requests and rdv.info per second per IP (default 200; burst 2×). */
  requestsPerSecondPerIp: number;
  /**
   * Punch requests forwarded to one agent per second, whoever asks (default 20; burst 2×): each makes that agent
   * verify a record and dial, and the per-IP rate alone let every stranger's address add 200 a second.
   */
  punchesPerSecondPerTarget: number;
  /**
   * Of those, what one IP (IPv6: one /64) may ask for towards one agent (default 2; burst 2×), checked first: before
   * it, one address with fresh keys used up an agent's whole rate, and nobody else's punch reached it. An honest
   * agent asks once per attempt and once per 10 s while relayed (`upgradeIntervalMs`), so 2 a second lets twenty
   * agents behind one NAT retry towards one agent at once; ten addresses are needed to use up the default 20/s.
   */
  punchesPerSecondPerTargetPerIp: number;
  /** Relays one agent may have open (default 8). */
  maxRelaysPerAgent: number;
  /**
   * Relays open towards one agent (default 128): strangers' keys cost nothing, so without it they could point every
   * relay at one agent, whose control channel carries them all (1,024 streams at most).
   */
  maxRelaysPerTarget: number;
  /**
   * Of those, relays opened from one IP (IPv6: one /64) towards one agent (default 16): two addresses with fresh keys
   * could otherwise hold all 128 (alive with a byte a minute) and deny the agent every relay; now eight are needed.
   * An agent opens one relay per peer, so sixteen agents behind one NAT can be relayed to one agent at once.
   */
  maxRelaysPerTargetPerIp: number;
  /** Relays opened from one IP (default 100): with free keys, one address could otherwise take every relay. */
  maxRelaysPerIp: number;
  /** Relays in all (default 1,000). */
  maxRelays: number;
  /** Relay bandwidth per agent, bytes per second (default 8 MiB/s). */
  relayBytesPerSecond: number;
  /**
   * Relay bandwidth per IP (IPv6: per /64), all its agents' relays together, bytes per second (default 32 MiB/s, four
   * agents' worth): keys are free, so per agent alone one address with 100 keys had 800 MiB/s.
   */
  relayBytesPerSecondPerIp: number;
  /** A relay with no bytes either way for this long is closed (default 60 s). */
  relayIdleMs: number;
  /**
   * STUN datagrams one IP may send per second to both STUN ports together, sustained (default 150; burst 2×). Every
   * registration asks both ports: `maxRegistrationsPerIp` agents heartbeating every 15 s send 134 a second. Until
   * 2026-11-25 it was 50, and a fleet of 1,000 behind one address had three of four requests dropped.
   */
  stunRequestsPerSecondPerIp: number;
  /** wss connections held at once (in handshake or open; default 4,096) and from one IP (default 1,024). */
  maxConnections: number;
  maxConnectionsPerIp: number;
  /** Upper bound of one TLS handshake on the wss port (default 5 s). */
  handshakeTimeoutMs: number;
  /** Only these agents may use the rendezvous (core's `allowPeers`); unset = any agent that proves its key. */
  allowAgents: readonly AgentId[] | undefined;
  /**
   * Valkey/Redis holding the registry, shared by every instance given the same URL and prefix (e.g.
   * `redis://valkey:6379`); unset = the registry lives in this process' memory (one instance).
   */
  redisUrl: string | undefined;
  /** Prefix of the keys in Valkey/Redis (default `agentlink:`): several clusters can share one server. */
  redisPrefix: string;
}

export const DEFAULT_CONFIG: RendezvousConfig = {
  host: '0.0.0.0',
  port: 4433,
  stunPorts: [3478, 3479],
  httpPort: 9090,
  publicHost: undefined,
  keyFile: undefined,
  maxRecordTtlMs: 120_000,
  maxRegistrations: 100_000,
  maxRegistrationsPerIp: 1000,
  connectionsPerSecondPerIp: 20,
  registrationsPerSecondPerIp: 100,
  requestsPerSecondPerIp: 200,
  punchesPerSecondPerTarget: 20,
  punchesPerSecondPerTargetPerIp: 2,
  maxRelaysPerAgent: 8,
  maxRelaysPerTarget: 128,
  maxRelaysPerTargetPerIp: 16,
  maxRelaysPerIp: 100,
  maxRelays: 1000,
  relayBytesPerSecond: 8 * 1024 * 1024,
  relayBytesPerSecondPerIp: 32 * 1024 * 1024,
  relayIdleMs: 60_000,
  stunRequestsPerSecondPerIp: 150,
  // Every registered agent holds its control connection: room for all registrations (in all and per IP), beyond an
  // ordinary agent's listener defaults (4,096 and 1,024).
  maxConnections: 100_000, // = maxRegistrations
  maxConnectionsPerIp: 1000, // = maxRegistrationsPerIp
  handshakeTimeoutMs: DEFAULT_LISTENER_LIMITS.handshakeTimeoutMs,
  allowAgents: undefined,
  redisUrl: undefined,
  redisPrefix: 'agentlink:',
};

const POSITIVE_INTEGERS = [
  'maxRecordTtlMs',
  'maxRegistrations',
  'maxRegistrationsPerIp',
  'connectionsPerSecondPerIp',
  'registrationsPerSecondPerIp',
  'requestsPerSecondPerIp',
  'punchesPerSecondPerTarget',
  'punchesPerSecondPerTargetPerIp',
  'maxRelaysPerAgent',
  'maxRelaysPerTarget',
  'maxRelaysPerTargetPerIp',
  'maxRelaysPerIp',
  'maxRelays',
  'relayBytesPerSecond',
  'relayBytesPerSecondPerIp',
  'relayIdleMs',
  'stunRequestsPerSecondPerIp',
  'maxConnections',
  'maxConnectionsPerIp',
] as const satisfies readonly (keyof RendezvousConfig)[];

const invalid = (message: string): AgentError => new AgentError('INVALID_ARGUMENT', message);

/** Checks a whole configuration (from flags or from code); throws INVALID_ARGUMENT naming the bad setting. */
export function checkConfig(config: RendezvousConfig): void {
  const isPort = (n: unknown): boolean => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 65535;
  if (!isPort(config.port)) throw invalid(`port must be 0-65535, got ${String(config.port)}`);
  if (config.httpPort !== -1 && !isPort(config.httpPort)) throw invalid(`httpPort must be 0-65535 or -1 (off), got ${String(config.httpPort)}`);
  const stun: unknown = config.stunPorts;
  if (!Array.isArray(stun) || stun.length !== 2 || !stun.every(isPort)) {
    throw invalid(`stunPorts must be two UDP ports (0-65535, 0 = any), got ${JSON.stringify(stun)}`);
  }
  if (stun[0] !== 0 && stun[0] === stun[1]) throw invalid(`stunPorts must be two different ports, got ${stun[0]} twice`);
  for (const key of POSITIVE_INTEGERS) {
    const value = config[key];
    if (!Number.isSafeInteger(value) || value <= 0) throw invalid(`${key} must be a positive integer, got ${String(value)}`);
  }
  resolveListenerLimits(listenerLimits(config));
  if (config.redisUrl !== undefined) {
    let protocol = '';
    try {
      protocol = new URL(config.redisUrl).protocol;
    } catch {
      // reported below
    }
    if (protocol !== 'redis:' && protocol !== 'rediss:') throw invalid(`redisUrl must be a redis:// or rediss:// URL, got "${config.redisUrl}"`);
  }
  if (typeof config.redisPrefix !== 'string' || config.redisPrefix.length > 64) throw invalid('redisPrefix must be a string of at most 64 characters');
  if (config.allowAgents !== undefined) {
    if (config.allowAgents.length === 0) throw invalid('allowAgents is empty: nobody could use the rendezvous');
    const bad = config.allowAgents.find((id) => !isAgentId(id));
    if (bad !== undefined) throw invalid(`allowAgents holds "${String(bad)}", which is not an AgentId`);
  }
}

/** The wss listener's limits (core's ListenerLimits), the same meanings as on every agentlink listener. */
export function listenerLimits(config: RendezvousConfig): ListenerLimits {
  return {
    maxConnections: config.maxConnections,
    maxConnectionsPerIp: config.maxConnectionsPerIp,
    newConnectionsPerIpPerSecond: config.connectionsPerSecondPerIp,
    handshakeTimeoutMs: config.handshakeTimeoutMs,
  };
}

/** Flags win over environment variables (`RENDEZVOUS_PORT` …), which win over defaults. Bad values throw INVALID_ARGUMENT. */
export function configFrom(argv: string[], env: NodeJS.ProcessEnv): RendezvousConfig {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        host: { type: 'string' },
        port: { type: 'string' },
        'stun-ports': { type: 'string' },
        'http-port': { type: 'string' },
        'public-host': { type: 'string' },
        'key-file': { type: 'string' },
        ...Object.fromEntries(Object.keys(LIMIT_FLAGS).map((flag) => [flag, { type: 'string' as const }])),
        'allow-agents': { type: 'string' },
        'redis-url': { type: 'string' },
        'redis-prefix': { type: 'string' },
        help: { type: 'boolean' },
      },
    }));
  } catch (error) {
    throw invalid(`${(error as Error).message} (see --help)`);
  }
  if (values.help) {
    const limits = Object.entries(LIMIT_FLAGS).map(([flag, key]) => `  --${flag} (${DEFAULT_CONFIG[key]})`);
    console.log(`agentlink-rendezvous [--host 0.0.0.0] [--port 4433] [--stun-ports 3478,3479] [--http-port 9090]
  [--public-host name] [--key-file rendezvous.key] [--allow-agents agents.txt] [--redis-url redis://host:6379] [--redis-prefix agentlink:]
Limits (default):
${limits.join('\n')}
Every flag has its environment variable: --max-registrations-per-ip is RENDEZVOUS_MAX_REGISTRATIONS_PER_IP, and so on
  (RENDEZVOUS_HOST, RENDEZVOUS_PORT, RENDEZVOUS_STUN_PORTS, RENDEZVOUS_HTTP_PORT, RENDEZVOUS_PUBLIC_HOST, RENDEZVOUS_KEY_FILE,
  RENDEZVOUS_ALLOW_AGENTS, RENDEZVOUS_REDIS_URL, RENDEZVOUS_REDIS_PREFIX).
--max-connections and --max-connections-per-ip follow --max-registrations and --max-registrations-per-ip unless given
  (every registered agent holds its control connection).
--allow-agents names a file of AgentIds, one a line (# comments); only those agents may use the rendezvous.
--redis-url keeps the registry in Valkey/Redis, shared by every instance with the same URL (default: in memory).`);
    process.exit(0);
  }
  /** Where each setting came from (`--port` or `RENDEZVOUS_PORT`), by flag: what an error names. */
  const sources = new Map<string, string>();
  const pick = (flag: keyof typeof values, name: string): { text: string; what: string } | undefined => {
    const flagged = values[flag] as string | undefined;
    const text = flagged ?? env[`RENDEZVOUS_${name}`];
    if (text === undefined) return undefined;
    const what = flagged !== undefined ? `--${flag}` : `RENDEZVOUS_${name}`;
    sources.set(flag, what);
    return { text, what };
  };
  const int = (flag: keyof typeof values, name: string, fallback: number): number => {
    const given = pick(flag, name);
    if (given === undefined) return fallback;
    if (!/^-?\d+$/.test(given.text.trim())) throw invalid(`${given.what} must be an integer, got "${given.text}"`);
    return Number(given.text);
  };
  const stunPorts = (): [number, number] => {
    const given = pick('stun-ports', 'STUN_PORTS');
    if (given === undefined) return DEFAULT_CONFIG.stunPorts;
    const parts = given.text.split(',').map((p) => p.trim());
    const ports = parts.map(Number);
    if (parts.length !== 2 || !parts.every((p) => /^\d+$/.test(p)) || !ports.every((p) => p <= 65535)) {
      throw invalid(`${given.what} must be two UDP ports separated by a comma, e.g. 3478,3479 (0 = any); got "${given.text}"`);
    }
    return [ports[0]!, ports[1]!];
  };
  const allowFile = pick('allow-agents', 'ALLOW_AGENTS');
  const config: RendezvousConfig = {
    ...DEFAULT_CONFIG,
    host: pick('host', 'HOST')?.text ?? DEFAULT_CONFIG.host,
    port: int('port', 'PORT', DEFAULT_CONFIG.port),
    stunPorts: stunPorts(),
    httpPort: int('http-port', 'HTTP_PORT', DEFAULT_CONFIG.httpPort),
    publicHost: pick('public-host', 'PUBLIC_HOST')?.text,
    keyFile: pick('key-file', 'KEY_FILE')?.text,
    ...limitsFrom((flag) => int(flag as keyof typeof values, envName(flag), Number.NaN)),
    allowAgents: allowFile === undefined ? undefined : readAllowList(allowFile.text),
    redisUrl: pick('redis-url', 'REDIS_URL')?.text,
    redisPrefix: pick('redis-prefix', 'REDIS_PREFIX')?.text ?? DEFAULT_CONFIG.redisPrefix,
  };
  try {
    checkConfig(config);
  } catch (error) {
    // checkConfig names the setting as code does (`maxRegistrations must be …`): the operator gave a flag or a
    // variable, and is told that one.
    const setting = /^(\w+) /.exec((error as Error).message)?.[1];
    const flag = setting === undefined ? undefined : FLAG_OF[setting as keyof RendezvousConfig];
    const what = flag === undefined ? undefined : sources.get(flag);
    if (what === undefined) throw error;
    throw invalid(`${what}${(error as Error).message.slice(setting!.length)}`);
  }
  return config;
}

/**
 * The limits a flag and an environment variable set (`--max-registrations-per-ip`, RENDEZVOUS_MAX_REGISTRATIONS_PER_IP).
 * The per-IP ones are here because a fleet behind one address (a datacenter's NAT) is one client to every per-IP
 * bound, and its operator must be able to raise them without writing code (until 2026-11-25 only the registry
 * size, relay bandwidth and STUN rate had flags; the rest were options of `startRendezvous()` alone).
 */
export const LIMIT_FLAGS = {
  'max-registrations': 'maxRegistrations',
  'max-registrations-per-ip': 'maxRegistrationsPerIp',
  'registrations-per-second-per-ip': 'registrationsPerSecondPerIp',
  'requests-per-second-per-ip': 'requestsPerSecondPerIp',
  'max-connections': 'maxConnections',
  'max-connections-per-ip': 'maxConnectionsPerIp',
  'connections-per-second-per-ip': 'connectionsPerSecondPerIp',
  'max-relays': 'maxRelays',
  'max-relays-per-ip': 'maxRelaysPerIp',
  'relay-bytes-per-second': 'relayBytesPerSecond',
  'relay-bytes-per-second-per-ip': 'relayBytesPerSecondPerIp',
  'stun-requests-per-second': 'stunRequestsPerSecondPerIp',
} as const satisfies Record<string, keyof RendezvousConfig>;

/** `max-registrations-per-ip` → `MAX_REGISTRATIONS_PER_IP` (after `RENDEZVOUS_`). */
function envName(flag: string): string {
  return flag.toUpperCase().replaceAll('-', '_');
}

type LimitKey = (typeof LIMIT_FLAGS)[keyof typeof LIMIT_FLAGS];

/**
 * The limits given (`given(flag)` is NaN when not given), defaults for the rest; connections in all and per IP
 * follow the registrations' when not given themselves: each registered agent holds its control connection, so
 * raising --max-registrations-per-ip alone left the fleet refused at 1,000 connections.
 */
function limitsFrom(given: (flag: string) => number): Pick<RendezvousConfig, LimitKey> {
  const values = Object.fromEntries(Object.entries(LIMIT_FLAGS).map(([flag, key]) => [key, given(flag)])) as Record<LimitKey, number>;
  const filled = followRegistrations(Object.fromEntries(Object.entries(values).filter(([, v]) => !Number.isNaN(v))), DEFAULT_CONFIG);
  return Object.fromEntries(Object.values(LIMIT_FLAGS).map((key) => [key, filled[key]])) as Pick<RendezvousConfig, LimitKey>;
}

/**
 * Fills in what `partial` leaves out from `defaults`, with `maxConnections` and `maxConnectionsPerIp` following
 * `maxRegistrations` and `maxRegistrationsPerIp` when those are given and they are not (from flags or from code).
 */
export function followRegistrations<T extends Partial<RendezvousConfig>>(partial: T, defaults: RendezvousConfig): RendezvousConfig & T {
  const filled = { ...defaults, ...partial };
  if (partial.maxConnections === undefined && partial.maxRegistrations !== undefined) filled.maxConnections = Math.max(defaults.maxConnections, partial.maxRegistrations);
  if (partial.maxConnectionsPerIp === undefined && partial.maxRegistrationsPerIp !== undefined) {
    filled.maxConnectionsPerIp = Math.max(defaults.maxConnectionsPerIp, partial.maxRegistrationsPerIp);
  }
  return filled;
}

/**
 * What a refusal by bound `key` tells the agent: the bound, its value and how the rendezvous' operator raises it, so
 * that a fleet refused behind one address is not left guessing (until 2026-11-25: "too many registrations from your
 * address", and nothing else).
 */
export function boundHint(key: keyof RendezvousConfig, value: number): string {
  const flag = FLAG_OF[key];
  const how = flag === undefined ? `startRendezvous({ ${key} })` : `--${flag} or RENDEZVOUS_${envName(flag)}`;
  return `the rendezvous' ${key} is ${value}; its operator raises it with ${how}`;
}

/** The flag of each setting a flag or variable sets. */
const FLAG_OF: Partial<Record<keyof RendezvousConfig, string>> = {
  host: 'host',
  port: 'port',
  stunPorts: 'stun-ports',
  httpPort: 'http-port',
  ...Object.fromEntries(Object.entries(LIMIT_FLAGS).map(([flag, key]) => [key, flag])),
  allowAgents: 'allow-agents',
  redisUrl: 'redis-url',
  redisPrefix: 'redis-prefix',
};
