import { parseArgs } from 'node:util';

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
  /** Registrations (heartbeats included) per second per IP, sustained (default 20; burst 2×). */
  registrationsPerSecondPerIp: number;
  /** Lookups and punch requests per second per IP (default 200; burst 2×). */
  requestsPerSecondPerIp: number;
  /** Relays one agent may have open (default 8) and relays in all (default 1,000). */
  maxRelaysPerAgent: number;
  maxRelays: number;
  /** Relay bandwidth per agent, bytes per second (default 8 MiB/s). */
  relayBytesPerSecond: number;
  /** A relay with no bytes either way for this long is closed (default 60 s). */
  relayIdleMs: number;
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
  registrationsPerSecondPerIp: 20,
  requestsPerSecondPerIp: 200,
  maxRelaysPerAgent: 8,
  maxRelays: 1000,
  relayBytesPerSecond: 8 * 1024 * 1024,
  relayIdleMs: 60_000,
};

/** Flags win over environment variables (`RENDEZVOUS_PORT` …), which win over defaults. */
export function configFrom(argv: string[], env: NodeJS.ProcessEnv): RendezvousConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'stun-ports': { type: 'string' },
      'http-port': { type: 'string' },
      'public-host': { type: 'string' },
      'key-file': { type: 'string' },
      'max-registrations': { type: 'string' },
      'relay-bytes-per-second': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    console.log(`agentlink-rendezvous [--host 0.0.0.0] [--port 4433] [--stun-ports 3478,3479] [--http-port 9090]
  [--public-host name] [--key-file rendezvous.key] [--max-registrations 100000] [--relay-bytes-per-second 8388608]
Environment: RENDEZVOUS_HOST, RENDEZVOUS_PORT, RENDEZVOUS_STUN_PORTS, RENDEZVOUS_HTTP_PORT, RENDEZVOUS_PUBLIC_HOST,
  RENDEZVOUS_KEY_FILE, RENDEZVOUS_MAX_REGISTRATIONS, RENDEZVOUS_RELAY_BYTES_PER_SECOND`);
    process.exit(0);
  }
  const pick = (flag: keyof typeof values, name: string): string | undefined => (values[flag] as string | undefined) ?? env[`RENDEZVOUS_${name}`];
  const int = (text: string | undefined, fallback: number, what: string): number => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n)) throw new Error(`${what} must be an integer, got "${text}"`);
    return n;
  };
  const stun = pick('stun-ports', 'STUN_PORTS')?.split(',').map((p) => int(p.trim(), 0, 'stun port'));
  return {
    ...DEFAULT_CONFIG,
    host: pick('host', 'HOST') ?? DEFAULT_CONFIG.host,
    port: int(pick('port', 'PORT'), DEFAULT_CONFIG.port, 'port'),
    stunPorts: stun && stun.length === 2 ? [stun[0]!, stun[1]!] : DEFAULT_CONFIG.stunPorts,
    httpPort: int(pick('http-port', 'HTTP_PORT'), DEFAULT_CONFIG.httpPort, 'http port'),
    publicHost: pick('public-host', 'PUBLIC_HOST'),
    keyFile: pick('key-file', 'KEY_FILE'),
    maxRegistrations: int(pick('max-registrations', 'MAX_REGISTRATIONS'), DEFAULT_CONFIG.maxRegistrations, 'max registrations'),
    relayBytesPerSecond: int(pick('relay-bytes-per-second', 'RELAY_BYTES_PER_SECOND'), DEFAULT_CONFIG.relayBytesPerSecond, 'relay bytes per second'),
  };
}
