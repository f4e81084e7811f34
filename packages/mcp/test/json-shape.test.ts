import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_MCP_JSON_CONTAINERS, MAX_MCP_JSON_DEPTH } from '../src/index.js';
import { checkJsonShape } from '../src/json-shape.js';

/** The nesting depth and container count JSON.parse builds for `value`. */
function shapeOf(value: unknown): { depth: number; containers: number } {
  if (value === null || typeof value !== 'object') return { depth: 0, containers: 0 };
  const children = Array.isArray(value) ? value : Object.values(value);
  let depth = 0;
  let containers = 1;
  for (const child of children) {
    const shape = shapeOf(child);
    depth = Math.max(depth, shape.depth);
    containers += shape.containers;
  }
  return { depth: depth + 1, containers };
}

/** Strings rich in what the walk must read as text: brackets, quotes, backslashes, and any unicode. */
const trickyString = fc.oneof(
  fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ',', ':') }),
  fc.string({ unit: 'binary' }),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    trickyString,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value')),
    fc.dictionary(trickyString, tie('value')),
  ),
})).value;

const walks = (text: string): boolean => {
  try {
    checkJsonShape(text);
    return true;
  } catch {
    return false;
  }
};

describe('the JSON shape walk against JSON.parse (fast-check)', () => {
  it('counts exactly the depth JSON.parse builds: wrapped up to the bound it passes, one more level it is refused', () => {
    fc.assert(
      fc.property(json, fc.integer({ min: 0, max: 2 }), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        const { depth } = shapeOf(JSON.parse(text));
        const wrap = (levels: number) => `${'[ '.repeat(levels)}${text}${' ]'.repeat(levels)}`;
        expect(walks(wrap(MAX_MCP_JSON_DEPTH - depth))).toBe(true);
        expect(walks(wrap(MAX_MCP_JSON_DEPTH - depth + 1))).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('counts exactly the containers JSON.parse builds: padded up to the bound it passes, one more it is refused', () => {
    fc.assert(
      fc.property(json, (value) => {
        const text = JSON.stringify(value);
        const { containers } = shapeOf(JSON.parse(text));
        // An outer array holding the value and `n` empty objects: containers + 1 + n in all.
        const padded = (n: number) => `[${text}${',{}'.repeat(n)}]`;
        expect(walks(padded(MAX_MCP_JSON_CONTAINERS - containers - 1))).toBe(true);
        expect(walks(padded(MAX_MCP_JSON_CONTAINERS - containers))).toBe(false);
      }),
      { numRuns: 50 },
    );
  });
});
