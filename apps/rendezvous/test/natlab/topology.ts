import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/**
 * A NAT lab in network namespaces (as root), after ../shared/natlab.md: a "public" bridge with the
 * rendezvous on 198.51.100.1, and for each side either a host straight on the bridge (no NAT) or a router
 * namespace (NAT by nftables) with a private host behind it.
 */
export type LabNat = 'none' | 'full-cone' | 'port-restricted' | 'symmetric' | 'sequential';

/**
 * Impairment of a NATed side's link, applied by the netlab forwarder (benchmarks/netlab/forwarder.c: this kernel
 * has no netem) in each direction. It sits on the link between the host and its NAT router, which every packet
 * of that side crosses, so to the agent it is the same as an impaired WAN link.
 */
export interface LinkImpairment {
  /** The compiled forwarder (benchmarks/netlab/lab.ts buildForwarder). */
  forwarder: string;
  delayMs: number;
  lossPercent: number;
  rateMbit: number;
}

export const RENDEZVOUS_IP = '198.51.100.1';
/** The fixed QUIC port of lab agents, so a full-cone NAT can forward it statically. */
export const AGENT_QUIC_PORT = 7000;

function run(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function inNs(ns: string, command: string, ...args: string[]): void {
  run('ip', ['netns', 'exec', ns, command, ...args]);
}

function nft(ns: string, script: string): void {
  execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: script, stdio: ['pipe', 'ignore', 'pipe'] });
}

export class PublicNetwork {
  readonly ns: string;
  private readonly sides: Side[] = [];
  /** Each pair of sides gets fresh interface names: a deleted namespace's veth may linger a moment. */
  private generation = 0;

  constructor(readonly prefix: string) {
    this.ns = `${prefix}pub`;
    run('ip', ['netns', 'add', this.ns]);
    inNs(this.ns, 'ip', 'link', 'set', 'lo', 'up');
    inNs(this.ns, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
    inNs(this.ns, 'ip', 'addr', 'add', `${RENDEZVOUS_IP}/24`, 'dev', 'br0');
    inNs(this.ns, 'ip', 'addr', 'add', '198.51.100.2/24', 'dev', 'br0');
    inNs(this.ns, 'ip', 'link', 'set', 'br0', 'up');
  }

  /** Adds side `index` (1 or 2) with the given NAT (and impaired link); await its `ready` before use. */
  addSide(index: 1 | 2, nat: LabNat, impair?: LinkImpairment): Side {
    if (index === 1) this.generation++;
    const side = new Side(this, `${this.prefix}${this.generation}`, index, nat, impair);
    this.sides.push(side);
    return side;
  }

  /** Plugs a veth end into the bridge; the other end goes to `ns` as `name` with `address`. */
  plug(ns: string, name: string, address: string, peerName: string): void {
    run('ip', ['link', 'add', peerName, 'type', 'veth', 'peer', 'name', `${peerName}x`]);
    run('ip', ['link', 'set', peerName, 'netns', this.ns]);
    run('ip', ['link', 'set', `${peerName}x`, 'netns', ns]);
    inNs(this.ns, 'ip', 'link', 'set', peerName, 'master', 'br0');
    inNs(this.ns, 'ip', 'link', 'set', peerName, 'up');
    inNs(ns, 'ip', 'link', 'set', `${peerName}x`, 'name', name);
    inNs(ns, 'ip', 'addr', 'add', address, 'dev', name);
    inNs(ns, 'ip', 'link', 'set', name, 'up');
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  }

  removeSides(): void {
    for (const side of this.sides.splice(0)) side.remove();
  }

  destroy(): void {
    this.removeSides();
    try {
      run('ip', ['netns', 'del', this.ns]);
    } catch {
      /* already gone */
    }
  }
}

export class Side {
  /** Where the side's agent runs. */
  readonly hostNs: string;
  readonly routerNs: string | undefined;
  readonly wanIp: string;
  /** Resolves when the side is up (at once, unless its link is impaired: then when the forwarder runs). */
  readonly ready: Promise<void>;
  private readonly namespaces: string[] = [];
  private forwarder: ChildProcess | undefined;

  constructor(net: PublicNetwork, tag: string, readonly index: 1 | 2, readonly nat: LabNat, impair?: LinkImpairment) {
    const p = `${tag}${index}`;
    this.hostNs = `${p}h`;
    this.namespaces.push(this.hostNs);
    this.ready = Promise.resolve();
    run('ip', ['netns', 'add', this.hostNs]);
    if (nat === 'none') {
      if (impair) throw new Error('only a NATed side has a link to impair');
      this.routerNs = undefined;
      this.wanIp = `198.51.100.2${index}`;
      net.plug(this.hostNs, 'eth0', `${this.wanIp}/24`, `${p}v`);
      return;
    }
    this.routerNs = `${p}r`;
    this.namespaces.push(this.routerNs);
    this.wanIp = `198.51.100.1${index}`;
    run('ip', ['netns', 'add', this.routerNs]);
    net.plug(this.routerNs, 'wan0', `${this.wanIp}/24`, `${p}w`);
    inNs(this.routerNs, 'sysctl', '-qw', 'net.ipv4.ip_forward=1');
    nft(this.routerNs, natRules(nat, `10.0.${index}.2`, this.wanIp));
    if (impair) {
      this.ready = this.impairedLink(impair, index);
      return;
    }
    // The private link: router lan0 10.0.<i>.1, host eth0 10.0.<i>.2, default route via the router.
    run('ip', ['link', 'add', `${p}l`, 'type', 'veth', 'peer', 'name', `${p}m`]);
    run('ip', ['link', 'set', `${p}l`, 'netns', this.routerNs]);
    run('ip', ['link', 'set', `${p}m`, 'netns', this.hostNs]);
    inNs(this.routerNs, 'ip', 'link', 'set', `${p}l`, 'name', 'lan0');
    inNs(this.routerNs, 'ip', 'addr', 'add', `10.0.${index}.1/24`, 'dev', 'lan0');
    inNs(this.routerNs, 'ip', 'link', 'set', 'lan0', 'up');
    inNs(this.hostNs, 'ip', 'link', 'set', `${p}m`, 'name', 'eth0');
    inNs(this.hostNs, 'ip', 'addr', 'add', `10.0.${index}.2/24`, 'dev', 'eth0');
    inNs(this.hostNs, 'ip', 'link', 'set', 'eth0', 'up');
    inNs(this.hostNs, 'ip', 'link', 'set', 'lo', 'up');
    inNs(this.hostNs, 'ip', 'route', 'add', 'default', 'via', `10.0.${index}.1`);
  }

  /** The private link through the forwarder: a TUN device named `lan0` in both the router and the host. */
  private async impairedLink(impair: LinkImpairment, index: 1 | 2): Promise<void> {
    const forwarder = spawn('nice', ['-n', '-10', impair.forwarder,
      '--ns-a', `/run/netns/${this.routerNs}`, '--ns-b', `/run/netns/${this.hostNs}`, '--dev', 'lan0',
      '--delay-ms', String(impair.delayMs), '--loss', String(impair.lossPercent), '--rate-mbit', String(impair.rateMbit),
      '--seed', String((Date.now() + index) % 1e9),
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.forwarder = forwarder;
    let stderr = '';
    forwarder.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = once(forwarder, 'exit').then(() => {
      throw new Error(`forwarder exited: ${stderr}`);
    });
    const [line] = (await Promise.race([once(forwarder.stdout!, 'data'), exited])) as [Buffer];
    if (!line.toString().includes('ready')) throw new Error(`forwarder: ${line.toString()}${stderr}`);
    exited.catch(() => undefined); // stopped on purpose in remove()
    for (const [ns, local, peer] of [[this.routerNs!, `10.0.${index}.1`, `10.0.${index}.2`], [this.hostNs, `10.0.${index}.2`, `10.0.${index}.1`]] as const) {
      inNs(ns, 'ip', 'addr', 'add', local, 'peer', peer, 'dev', 'lan0');
      inNs(ns, 'ip', 'link', 'set', 'lan0', 'up', 'txqueuelen', '10000');
      inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    }
    inNs(this.hostNs, 'ip', 'route', 'add', 'default', 'via', `10.0.${index}.1`, 'dev', 'lan0');
  }

  /** Drops UDP between this side's router and `ip` (a firewall that blocks punching), or lifts that block. */
  blockUdpTo(ip: string, blocked: boolean): void {
    if (!this.routerNs) throw new Error('only a NATed side has a router');
    if (blocked) {
      nft(this.routerNs, `table inet block {\n chain forward { type filter hook forward priority -10; ip daddr ${ip} meta l4proto udp drop; ip saddr ${ip} meta l4proto udp drop; }\n}\n`);
    } else {
      nft(this.routerNs, 'delete table inet block\n');
    }
  }

  remove(): void {
    this.forwarder?.kill('SIGKILL');
    for (const ns of this.namespaces) {
      try {
        run('ip', ['netns', 'del', ns]);
      } catch {
        /* already gone */
      }
    }
  }
}

/** nftables of a router: the NAT behaviour plus the stateful firewall punching needs (see natlab.md). */
function natRules(nat: LabNat, host: string, wanIp: string): string {
  const masquerade = nat === 'symmetric' ? 'masquerade fully-random' : 'masquerade';
  const fullCone = nat === 'full-cone';
  // A symmetric NAT that hands out ports in sequence (many carrier-grade NATs do): nat chains see only the first
  // packet of each flow, so the counter steps once per new UDP flow (one per destination).
  const sequential = nat === 'sequential' ? `oifname "wan0" meta l4proto udp snat to ${wanIp} : numgen inc mod 20000 offset 30000` : '';
  return `
table ip nat {
  chain prerouting {
    type nat hook prerouting priority -100;
    ${fullCone ? `iifname "wan0" udp dport ${AGENT_QUIC_PORT} dnat to ${host}:${AGENT_QUIC_PORT}` : ''}
  }
  chain postrouting {
    type nat hook postrouting priority 100;
    ${sequential}
    oifname "wan0" ${masquerade}
  }
}
table inet filter {
  chain input {
    type filter hook input priority 0;
    iifname "wan0" ct state established,related accept
    iifname "wan0" drop
  }
  chain forward {
    type filter hook forward priority 0;
    iifname "wan0" ct state established,related accept
    ${fullCone ? 'iifname "wan0" ct status dnat accept' : ''}
    iifname "wan0" drop
  }
}
`;
}
