import { AgentError } from '@agentlink/core';

/**
 * MCP messages are JSON text (json-rpc.ts), so core's MessagePack walk (nesting 32, 262,144 containers per frame)
 * never sees their structure. JSON.parse builds every array and object a message declares: 16 MiB of `[],` is
 * 5.5 million arrays, ~237 MB of heap and ~3 s of parsing from one message, and 8 million nested `[` took 7 s.
 * The text is walked first, linearly and without recursion, and refused past these bounds.
 */
export const MAX_MCP_JSON_DEPTH = 256;
/** As core's MAX_CONTAINERS_PER_FRAME: at ~40–70 bytes of heap each, about 16 MiB of heap per message at most. */
export const MAX_MCP_JSON_CONTAINERS = 262_144;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/** Throws PROTOCOL_ERROR when `text` nests deeper than MAX_MCP_JSON_DEPTH or holds more than MAX_MCP_JSON_CONTAINERS. */
export function checkJsonShape(text: string): void {
  let depth = 0;
  let containers = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = closingQuote(text, i);
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > MAX_MCP_JSON_DEPTH) throw new AgentError('PROTOCOL_ERROR', `an MCP message nests deeper than ${MAX_MCP_JSON_DEPTH}`);
      if (++containers > MAX_MCP_JSON_CONTAINERS) {
        throw new AgentError('PROTOCOL_ERROR', `an MCP message holds more than ${MAX_MCP_JSON_CONTAINERS} arrays and objects`);
      }
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
}

/**
 * Where the string opened at `open` ends (brackets inside it are text), found by the engine's native search: a
 * large text message costs about what JSON.parse does, not a loop per character. A quote after an odd run of
 * backslashes is escaped. An unterminated string ends the walk (JSON.parse refuses it).
 */
function closingQuote(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return text.length;
}
