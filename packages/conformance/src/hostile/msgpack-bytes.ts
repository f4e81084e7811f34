/**
 * Hand-written MessagePack for hostile messages: values a polite encoder would never produce (a map where the
 * message array belongs, `__proto__` keys, arrays nested 100,000 deep). Only what the attacks need.
 */
export type Packable = string | number | null | boolean | Packable[] | { entries: Array<[string, Packable]> };

export function pack(value: Packable): Buffer {
  if (value === null) return Buffer.from([0xc0]);
  if (value === true) return Buffer.from([0xc3]);
  if (value === false) return Buffer.from([0xc2]);
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) throw new Error(`pack: ${value} is not a u32`);
    const bytes = Buffer.alloc(5);
    bytes[0] = 0xce;
    bytes.writeUInt32BE(value, 1);
    return bytes;
  }
  if (typeof value === 'string') {
    const text = Buffer.from(value, 'utf8');
    if (text.length > 255) throw new Error('pack: strings up to 255 bytes');
    return Buffer.concat([Buffer.from([0xd9, text.length]), text]);
  }
  if (Array.isArray(value)) {
    if (value.length > 15) throw new Error('pack: arrays up to 15 elements');
    return Buffer.concat([Buffer.from([0x90 | value.length]), ...value.map(pack)]);
  }
  if (value.entries.length > 15) throw new Error('pack: maps up to 15 entries');
  return Buffer.concat([Buffer.from([0x80 | value.entries.length]), ...value.entries.flatMap(([k, v]) => [pack(k), pack(v)])]);
}

/** An array nested `depth` deep around nil: [[[…[nil]…]]], 1 byte per level. */
export function deepArray(depth: number): Buffer {
  const bytes = Buffer.alloc(depth + 1, 0x91);
  bytes[depth] = 0xc0;
  return bytes;
}

/** A request message (type 1) with a body given as raw msgpack bytes. */
export function requestWithRawBody(method: string, body: Buffer): Buffer {
  // [1, method, nil timeout, priority 2, {} metadata, body, mode 0]
  return Buffer.concat([Buffer.from([0x97, 0x01]), pack(method), Buffer.from([0xc0, 0x02, 0x80]), body, Buffer.from([0x00])]);
}
