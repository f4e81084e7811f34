/**
 * The hand-written frame decoder (`tupleToMessage`) against the zod schemas it replaces on the hot path
 * (message-schemas.ts, the specification): both see the same tuples — valid ones, and the same mutated with wrong
 * types, missing and extra fields, prototype keys, huge and odd numbers, long and surrogate-laden texts, and junk
 * of every JavaScript kind — and must give the same verdict and, when they accept, the same message.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { AgentError } from '../src/index.js';
import { decodePayload, unpackPayload } from '../src/wire/codec.js';
import { tupleToMessageBySchema } from '../src/wire/message-schemas.js';
import { MAX_CODE_LENGTH, MAX_METADATA_ENTRIES, MAX_METHOD_LENGTH, MAX_TEXT, tupleToMessage, type WireMessage } from '../src/wire/messages.js';
import { PROTOTYPE_KEYS } from './fuzz/inputs.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);

/** Runs both decoders on `value`; fails unless they agree. Returns the verdict, for the tallies. */
function agree(value: unknown): boolean {
  const fast = tupleToMessage(value);
  const spec = tupleToMessageBySchema(value);
  if (fast === undefined || spec === undefined) {
    expect(fast !== undefined, `${describeValue(value)}: the decoder's verdict differs from the schemas'`).toBe(spec !== undefined);
    return false;
  }
  // Deep and strict: same keys, same prototypes (the metadata is a fresh plain object in both), -0 is not 0.
  expect(isDeepStrictEqual(fast, spec), `${describeValue(value)} decoded differently`).toBe(true);
  if ('body' in spec) expect(Object.is((fast as { body: unknown }).body, spec.body)).toBe(true); // passed through, not copied
  if (spec.type === 'request') expect(Object.getPrototypeOf((fast as typeof spec).metadata)).toBe(Object.prototype);
  return true;
}

function describeValue(value: unknown): string {
  try {
    return JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)).slice(0, 300);
  } catch {
    return String(value);
  }
}

// ---- field values: around every limit of the schemas, and junk of every kind ---------------------------------

const SURROGATE_PAIR = '\u{1F600}';
/** Texts at and around `max` code points, in plain units, surrogate pairs, and lone surrogates. */
function textsAround(max: number): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom(max - 1, max, max + 1).map((n) => 'a'.repeat(Math.max(0, n))),
    fc.constantFrom(max - 1, max, max + 1).map((n) => SURROGATE_PAIR.repeat(Math.max(0, n))), // 2 units, 1 code point each
    fc.constantFrom(max, max + 1).map((n) => '\ud800'.repeat(n)), // lone high surrogates: one code point each
    fc.constantFrom(max, max + 1).map((n) => 'a' + SURROGATE_PAIR.repeat(n)),
    fc.constantFrom(max, max + 1).map((n) => '\udc00\ud800'.repeat(n)), // reversed pairs are two code points
  );
}

const NUMBERS = [0, -0, 1, 2, 3, 4, 8, 9, -1, 0.5, 1.5, 3.0000000000000004, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 64, -(2 ** 53), 1e308, Number.MAX_VALUE, Number.MIN_VALUE, Number.EPSILON, Infinity, -Infinity, NaN];

function withOwnKey(key: string, value: unknown, base: Record<string, unknown> = {}): Record<string, unknown> {
  const object = { ...base };
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  return object;
}

/** Objects a record check must judge: prototype keys, null prototypes, symbols, hidden keys, exotic objects. */
const oddObjects: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...PROTOTYPE_KEYS).chain((key) => fc.oneof(fc.string(), fc.anything(), fc.constant(Object), fc.constant(Array)).map((value) => withOwnKey(key, value, { a: 'b' }))),
  fc.constant(JSON.parse('{"__proto__": "x", "a": "b"}') as unknown),
  fc.constant(JSON.parse('{"__proto__": 5}') as unknown),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }).map((entries) => Object.assign(Object.create(null) as object, entries)),
  fc.constant({ [Symbol('s')]: 'x' }),
  fc.constant(Object.defineProperty({ a: 'b' }, Symbol('hidden'), { value: 'x', enumerable: false })),
  fc.constant(Object.defineProperty({ a: 'b' }, 'hidden', { value: 5, enumerable: false })),
  fc.constant({ constructor: { prototype: {} } }),
  fc.constant({ constructor: { prototype: Object.prototype } }),
  fc.constant(Object.create({ inherited: 'x' }) as unknown),
  fc.constant(Object.create(Object.create(null) as object) as unknown),
  fc.constant(new Map([['a', 'b']])),
  fc.constant(new Set(['a'])),
  fc.constant(new Date(0)),
  fc.constant(Buffer.from('ab')),
  fc.constant(new Uint8Array(2)),
  fc.constant(new (class Metadata {})()),
  fc.constant(Object.assign(() => undefined, { a: 'b' })),
  fc.constant(Object('text') as unknown),
  fc.constant(Object(7) as unknown),
  fc.constant([]),
  fc.constant(['a']),
);

const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...NUMBERS) },
  { weight: 3, arbitrary: fc.anything({ withBigInt: true, withBoxedValues: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withObjectString: true, withSparseArray: true, withTypedArray: true, withUnicodeString: true, maxDepth: 3 }) },
  { weight: 2, arbitrary: oddObjects },
  { weight: 1, arbitrary: fc.constantFrom(...PROTOTYPE_KEYS, '1', '', 'normal', 'unary') },
  { weight: 1, arbitrary: fc.constantFrom(null, undefined, true, false, 1n, Symbol('junk')) },
);

// ---- valid tuples, field by field ----------------------------------------------------------------------------

const method = fc.oneof(fc.string({ minLength: 1, maxLength: 20, unit: 'binary' }), textsAround(MAX_METHOD_LENGTH), fc.constantFrom(...PROTOTYPE_KEYS));
const count = fc.oneof(fc.nat(), fc.constantFrom(0, -0, 2 ** 53 - 1, 2 ** 31));
const metaKey = fc.oneof({ weight: 4, arbitrary: fc.string({ maxLength: 10, unit: 'binary' }) }, fc.constantFrom(...PROTOTYPE_KEYS, '0', '42', ''), textsAround(MAX_TEXT));
const metaValue = fc.oneof({ weight: 4, arbitrary: fc.string({ maxLength: 10, unit: 'binary' }) }, textsAround(MAX_TEXT));
const metadata = fc.oneof(
  { weight: 3, arbitrary: fc.dictionary(metaKey, metaValue, { maxKeys: 4 }) },
  // Around the entry limit: a `__proto__` key among them is dropped, not counted.
  { weight: 1, arbitrary: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), fc.string({ maxLength: 3 }), { minKeys: MAX_METADATA_ENTRIES - 1, maxKeys: MAX_METADATA_ENTRIES + 2 }) },
  { weight: 1, arbitrary: fc.dictionary(metaKey, metaValue, { maxKeys: 4, noNullPrototype: false }) },
);
const body = fc.oneof(fc.anything({ maxDepth: 2, withNullPrototype: true }), fc.uint8Array({ maxLength: 16 }), fc.constant(undefined));
const code = fc.oneof(fc.constantFrom('HANDLER_ERROR', 'CANCELLED', 'DEADLINE_EXCEEDED', 'UNKNOWN', 'SOMETHING_NEW', ''), fc.constantFrom(...PROTOTYPE_KEYS), textsAround(MAX_CODE_LENGTH));
const text = fc.oneof(fc.string({ maxLength: 20, unit: 'binary' }), textsAround(MAX_TEXT));

const validTuple: fc.Arbitrary<unknown[]> = fc.oneof(
  fc.tuple(fc.constant(1), method, fc.oneof(fc.constant(null), count), fc.constantFrom(0, 1, 2, 3, -0), metadata, body, fc.constantFrom(0, 1, 2, 3, -0)),
  fc.tuple(fc.constant(2), body),
  fc.tuple(fc.constant(3), body),
  fc.tuple(fc.constant(4)),
  fc.tuple(fc.constantFrom(5, 6), code, text),
  fc.tuple(fc.constantFrom(7, 8), count),
);

// ---- mutations of a tuple ------------------------------------------------------------------------------------

type Mutation = (tuple: unknown[]) => fc.Arbitrary<unknown>;
const mutations: Mutation[] = [
  // a field (the type included) replaced by junk
  (t) => fc.tuple(fc.nat({ max: t.length - 1 }), junk).map(([i, v]) => t.map((x, j) => (j === i ? v : x))),
  // a field dropped, or a field added
  (t) => fc.nat({ max: t.length - 1 }).map((i) => t.filter((_, j) => j !== i)),
  (t) => fc.tuple(fc.nat({ max: t.length }), junk).map(([i, v]) => [...t.slice(0, i), v, ...t.slice(i)]),
  // the type number of another message, or no number at all
  (t) => fc.constantFrom(...NUMBERS, ...PROTOTYPE_KEYS, '1').map((type) => [type, ...t.slice(1)]),
  // a hole where a field was (a sparse array of the right length)
  (t) =>
    fc.nat({ max: t.length - 1 }).map((i) => {
      const sparse = [...t];
      delete sparse[i];
      return sparse;
    }),
  // the tuple as something that is not an array
  (t) => fc.constantFrom<unknown>({ ...t }, Object.assign(Object.create(null) as object, t), new Set(t), JSON.stringify(t)),
  // the tuple nested inside junk
  (t) => junk.map((j) => [t, j]),
];
const mutatedTuple = validTuple.chain((t) => fc.constantFrom(...mutations).chain((mutate) => mutate(t)));

describe('the hand-written frame decoder agrees with the zod schemas', { timeout: 300_000 }, () => {
  it(`on valid and mutated tuples (${RUNS} runs each)`, () => {
    const tally = { accepted: 0, rejected: 0, byType: new Map<unknown, { accepted: number; rejected: number }>() };
    const record = (value: unknown, verdict: boolean): void => {
      const type = Array.isArray(value) ? value[0] : 'not an array';
      const entry = tally.byType.get(type) ?? { accepted: 0, rejected: 0 };
      entry[verdict ? 'accepted' : 'rejected']++;
      tally.byType.set(type, entry);
      tally[verdict ? 'accepted' : 'rejected']++;
    };
    fc.assert(fc.property(validTuple, (value) => record(value, agree(value))), { numRuns: RUNS });
    fc.assert(fc.property(mutatedTuple, (value) => record(value, agree(value))), { numRuns: RUNS });
    fc.assert(fc.property(junk, (value) => record(value, agree(value))), { numRuns: RUNS / 10 });
    // Not vacuous: every message type was both accepted and rejected many times.
    for (const type of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const entry = tally.byType.get(type);
      expect(entry?.accepted, `type ${type} accepted`).toBeGreaterThan(RUNS / 200);
      expect(entry?.rejected, `type ${type} rejected`).toBeGreaterThan(RUNS / 200);
    }
  });

  it('on the limits one by one', () => {
    const request = (field: number, value: unknown): unknown[] => {
      const tuple: unknown[] = [1, 'm', null, 2, {}, null, 0];
      tuple[field] = value;
      return tuple;
    };
    const cases: Array<[unknown, boolean]> = [
      [request(1, 'a'.repeat(MAX_METHOD_LENGTH)), true],
      [request(1, 'a'.repeat(MAX_METHOD_LENGTH + 1)), false],
      [request(1, SURROGATE_PAIR.repeat(MAX_METHOD_LENGTH)), true], // 512 units, 256 code points
      [request(1, ''), false],
      [request(2, 2 ** 53 - 1), true],
      [request(2, 2 ** 53), false],
      [request(2, -0), true],
      [request(2, 1.5), false],
      [request(3, 3), true],
      [request(3, 4), false],
      [request(4, Object.fromEntries(Array.from({ length: MAX_METADATA_ENTRIES }, (_, i) => [`k${i}`, 'v']))), true],
      [request(4, Object.fromEntries(Array.from({ length: MAX_METADATA_ENTRIES + 1 }, (_, i) => [`k${i}`, 'v']))), false],
      [request(4, withOwnKey('__proto__', 5, Object.fromEntries(Array.from({ length: MAX_METADATA_ENTRIES }, (_, i) => [`k${i}`, 'v'])))), true],
      [request(4, { constructor: 'c', toString: 't' }), true],
      [request(4, new Map()), false],
      [request(6, 3), true],
      [request(6, 4), false],
      [[5, 'X'.repeat(MAX_CODE_LENGTH), 'm'], true],
      [[5, 'X'.repeat(MAX_CODE_LENGTH + 1), 'm'], false],
      [[6, 'CANCELLED', 'a'.repeat(MAX_TEXT + 1)], false],
      [[7, 2 ** 53 - 1], true],
      [[8, -1], false],
      [[2], false],
      [[2, undefined], true],
      [[4, undefined], false],
    ];
    for (const [value, accepted] of cases) {
      expect(agree(value), describeValue(value)).toBe(accepted);
    }
  });
});

describe('decodePayload agrees with the zod schemas on bytes', { timeout: 300_000 }, () => {
  const packr = new Packr({ useRecords: false, moreTypes: false, encodeUndefinedAsNil: true });

  /** The payload through the real decoder, and through the shape check, msgpackr and zod: same verdict and message. */
  function agreeOnBytes(payload: Uint8Array): void {
    let spec: WireMessage | AgentError;
    try {
      spec = tupleToMessageBySchema(unpackPayload(payload)) ?? new AgentError('PROTOCOL_ERROR', 'not a message');
    } catch (error) {
      spec = error as AgentError;
    }
    let fast: WireMessage | AgentError;
    try {
      fast = decodePayload(payload);
    } catch (error) {
      fast = error as AgentError;
    }
    if (spec instanceof AgentError) {
      expect(fast).toBeInstanceOf(AgentError);
      expect((fast as AgentError).code).toBe('PROTOCOL_ERROR');
      expect(spec.code).toBe('PROTOCOL_ERROR');
    } else {
      expect(isDeepStrictEqual(fast, spec)).toBe(true);
    }
  }

  it(`on encoded tuples, valid and mutated, and on their bytes flipped (${RUNS} runs each)`, () => {
    const encodable = fc.oneof(validTuple, mutatedTuple).filter((value) => {
      try {
        packr.pack(value);
        return true;
      } catch {
        return false; // symbols, functions: nothing a peer can send
      }
    });
    fc.assert(fc.property(encodable, (value) => agreeOnBytes(packr.pack(value))), { numRuns: RUNS });
    fc.assert(
      fc.property(encodable, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), (value, flips) => {
        const bytes = Buffer.from(packr.pack(value));
        for (const [at, byte] of flips) bytes[at % bytes.length] = byte;
        agreeOnBytes(bytes);
      }),
      { numRuns: RUNS },
    );
  });
});
