import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { AgentError } from '@agentlink/core';
import stun from '@msimerson/stun';

/** The datagram side channel of a QUIC endpoint: STUN packets on the agent's one UDP socket. */
export interface RawDatagramSocket {
  sendRaw(host: string, port: number, data: Buffer): Promise<void>;
  recvRaw(): Promise<{ host: string; port: number; data: Buffer } | null>;
}

export interface HostPort {
  host: string;
  port: number;
}

const { STUN_BINDING_REQUEST, STUN_BINDING_RESPONSE, STUN_ATTR_XOR_MAPPED_ADDRESS, STUN_ATTR_MAPPED_ADDRESS } = stun.constants;

/**
 * STUN binding requests (RFC 8489) from the agent's QUIC socket, so the mapping learnt is the one its QUIC
 * connections use. One receive loop per socket hands responses to requests by transaction id.
 */
export class StunClient {
  private readonly pending = new Map<string, (mapped: HostPort) => void>();
  private receiving = false;

  constructor(private readonly socket: RawDatagramSocket) {}

  /** Our address as `server` sees it. Retransmits (RFC 8489 style, doubling from 250 ms) within `timeoutMs`. */
  async binding(server: HostPort, timeoutMs = 3000): Promise<HostPort> {
    this.startReceiving();
    const transaction = randomBytes(12);
    const key = transaction.toString('hex');
    const request = stun.createMessage(STUN_BINDING_REQUEST, transaction).toBuffer();
    return new Promise<HostPort>((resolve, reject) => {
      let wait = 250;
      let timer: NodeJS.Timeout;
      const deadline = setTimeout(() => {
        clearTimeout(timer);
        this.pending.delete(key);
        reject(new AgentError('UNAVAILABLE', `no STUN answer from ${server.host}:${server.port} within ${timeoutMs} ms`));
      }, timeoutMs);
      const send = (): void => {
        this.socket.sendRaw(server.host, server.port, request).catch(() => undefined);
        timer = setTimeout(send, (wait *= 2) / 2);
      };
      this.pending.set(key, (mapped) => {
        clearTimeout(deadline);
        clearTimeout(timer);
        this.pending.delete(key);
        resolve(mapped);
      });
      send();
    });
  }

  private startReceiving(): void {
    if (this.receiving) return;
    this.receiving = true;
    void (async () => {
      for (let datagram = await this.socket.recvRaw(); datagram; datagram = await this.socket.recvRaw()) {
        const answer = parseBindingResponse(datagram.data);
        if (answer) this.pending.get(answer.transaction)?.(answer.mapped);
      }
    })().catch(() => undefined);
  }
}

/** A binding success response's transaction id and mapped address; undefined for anything else. */
export function parseBindingResponse(data: Buffer): { transaction: string; mapped: HostPort } | undefined {
  try {
    const message = stun.decode(data);
    if (message.type !== STUN_BINDING_RESPONSE) return undefined;
    const transaction = message.transactionId;
    const xorMapped = readXorMappedAddress(data, transaction);
    if (xorMapped) return { transaction: transaction.toString('hex'), mapped: xorMapped };
    const attribute = message.getAttribute(STUN_ATTR_MAPPED_ADDRESS);
    if (!attribute) return undefined;
    return { transaction: transaction.toString('hex'), mapped: { host: attribute.value.address, port: attribute.value.port } };
  } catch {
    return undefined; // not STUN, or malformed: ignored
  }
}

const HEADER_BYTES = 20;
const MAGIC_COOKIE = Buffer.from([0x21, 0x12, 0xa4, 0x42]);

/**
 * XOR-MAPPED-ADDRESS (RFC 8489 §14.2), read here: @msimerson/stun 3.2 decodes an IPv6 one with the transaction
 * id still unset, so it came back as the address XOR the transaction id. IPv4 and IPv6; undefined if absent.
 */
function readXorMappedAddress(data: Buffer, transaction: Buffer): HostPort | undefined {
  for (let at = HEADER_BYTES; at + 4 <= data.length; ) {
    const type = data.readUInt16BE(at);
    const length = data.readUInt16BE(at + 2);
    const value = data.subarray(at + 4, at + 4 + length);
    if (value.length < length) return undefined;
    if (type === STUN_ATTR_XOR_MAPPED_ADDRESS && value.length >= 8) {
      const port = value.readUInt16BE(2) ^ 0x2112;
      const pad = Buffer.concat([MAGIC_COOKIE, transaction]);
      if (value[1] === 0x01 && value.length === 8) {
        return { host: [...value.subarray(4, 8)].map((b, i) => b ^ pad[i]!).join('.'), port };
      }
      if (value[1] === 0x02 && value.length === 20) {
        const bytes = Buffer.from(value.subarray(4, 20).map((b, i) => b ^ pad[i]!));
        const groups = Array.from({ length: 8 }, (_, i) => bytes.readUInt16BE(i * 2).toString(16));
        // The WHATWG URL parser writes IPv6 in its canonical short form (RFC 5952).
        return { host: new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1), port };
      }
      return undefined;
    }
    at += 4 + Math.ceil(length / 4) * 4;
  }
  return undefined;
}

/** A STUN server answering binding requests on one UDP port (the rendezvous runs two). */
export async function startStunServer(host: string, port: number): Promise<{ port: number; close(): void }> {
  const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  const server = stun.createServer({ type: host.includes(':') ? 'udp6' : 'udp4', socket });
  server.on('bindingRequest', (request, rinfo) => {
    const response = stun.createMessage(STUN_BINDING_RESPONSE, request.transactionId);
    response.addXorAddress(rinfo.address, rinfo.port);
    response.addSoftware('agentlink-rendezvous');
    server.send(response, rinfo.port, rinfo.address);
  });
  server.on('error', () => undefined); // a bad datagram must not take the service down
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(port, host, () => resolve());
  });
  return { port: socket.address().port, close: () => socket.close() };
}
