import { readFileSync } from 'node:fs';
import { AgentError, parseAgentId, type AgentId } from '@agentlink/core';

/**
 * Reads an allow list: one AgentId per line; blank lines and `#` comments are ignored. A malformed line or a
 * list with no AgentId is an error naming the file and line, so a typo cannot silently lock everyone out.
 */
export function readAllowList(file: string): AgentId[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new AgentError('INVALID_ARGUMENT', `cannot read the allow list ${file}: ${(error as Error).message}`);
  }
  return parseAllowList(text, file);
}

export function parseAllowList(text: string, source: string): AgentId[] {
  const ids = new Set<AgentId>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    try {
      ids.add(parseAgentId(line));
    } catch (error) {
      throw new AgentError('INVALID_ARGUMENT', `${source}:${index + 1}: "${line}" is not an AgentId (${(error as Error).message})`);
    }
  });
  if (ids.size === 0) throw new AgentError('INVALID_ARGUMENT', `${source} lists no AgentId: nobody could use the rendezvous`);
  return [...ids];
}
