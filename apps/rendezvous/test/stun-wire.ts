import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { crc32 } from 'node:zlib';

/** STUN messages built byte by byte (RFC 5389 §6, §15), independent of the server's encoder and decoder. */
export interface RawAttribute {
  type: number;
  value?: Buffer;
}

export const BINDING_REQUEST = 0x0001;
export const BINDING_INDICATION = 0x0011;
export const BINDING_SUCCESS = 0x0101;
export const BINDING_ERROR = 0x0111;
export const ALLOCATE_REQUEST = 0x0003;
const MAGIC_COOKIE = 0x2112a442;
const FINGERPRINT = 0x8028;

export function stunMessage(type: number, attributes: RawAttribute[] = [], options: { fingerprint?: 'good' | 'bad'; transaction?: Buffer } = {}): Buffer {
  const parts = attributes.map(({ type: t, value = Buffer.alloc(0) }) => {
    const header = Buffer.alloc(4);
    header.writeUInt16BE(t, 0);
    header.writeUInt16BE(value.length, 2);
    return Buffer.concat([header, value, Buffer.alloc((4 - (value.length % 4)) % 4)]);
  });
  const header = Buffer.alloc(20);
  header.writeUInt16BE(type, 0);
  header.writeUInt32BE(MAGIC_COOKIE, 4);
  (options.transaction ?? randomBytes(12)).copy(header, 8);
  let body = Buffer.concat(parts);
  if (options.fingerprint) {
    header.writeUInt16BE(body.length + 8, 2);
    const crc = (crc32(Buffer.concat([header, body])) ^ 0x5354554e) >>> 0;
    const attribute = Buffer.alloc(8);
    attribute.writeUInt16BE(FINGERPRINT, 0);
    attribute.writeUInt16BE(4, 2);
    attribute.writeUInt32BE(options.fingerprint === 'good' ? crc : (crc ^ 1) >>> 0, 4);
    body = Buffer.concat([body, attribute]);
  }
  header.writeUInt16BE(body.length, 2);
  return Buffer.concat([header, body]);
}

/** The attributes of a received message, in order (type, value without padding). */
export function attributesOf(message: Buffer): RawAttribute[] {
  const out: RawAttribute[] = [];
  for (let at = 20; at + 4 <= message.length; ) {
    const type = message.readUInt16BE(at);
    const length = message.readUInt16BE(at + 2);
    out.push({ type, value: message.subarray(at + 4, at + 4 + length) });
    at += 4 + length + ((4 - (length % 4)) % 4);
  }
  return out;
}

/** True when the message ends with a FINGERPRINT that matches its bytes. */
export function fingerprintValid(message: Buffer): boolean {
  if (message.length < 28 || message.readUInt16BE(message.length - 8) !== FINGERPRINT) return false;
  return ((crc32(message.subarray(0, message.length - 8)) ^ 0x5354554e) >>> 0) === message.readUInt32BE(message.length - 4);
}

/** XOR-MAPPED-ADDRESS (IPv4) of a success response. */
export function xorMappedAddress(message: Buffer): { address: string; port: number } | undefined {
  const attribute = attributesOf(message).find((a) => a.type === 0x0020)?.value;
  if (!attribute || attribute[1] !== 0x01) return undefined;
  const port = attribute.readUInt16BE(2) ^ (MAGIC_COOKIE >>> 16);
  const raw = (attribute.readUInt32BE(4) ^ MAGIC_COOKIE) >>> 0;
  return { address: [raw >>> 24, (raw >>> 16) & 255, (raw >>> 8) & 255, raw & 255].join('.'), port };
}

/** A UDP client on loopback that keeps every datagram it receives, in order; `next()` reads them one by one. */
export async function udpClient(): Promise<{ socket: Socket; received: Buffer[]; port: number; send(message: Buffer, port: number): Promise<void>; next(): Promise<Buffer> }> {
  const socket = createSocket('udp4');
  const received: Buffer[] = [];
  let cursor = 0;
  socket.on('message', (m) => received.push(m));
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  return {
    socket,
    received,
    port: socket.address().port,
    send: (message, port) => new Promise<void>((resolve, reject) => socket.send(message, port, '127.0.0.1', (e) => (e ? reject(e) : resolve()))),
    next: async () => {
      while (cursor >= received.length) await once(socket, 'message');
      return received[cursor++]!;
    },
  };
}
