import { setTimeout as sleep } from 'node:timers/promises';

export interface GenerateRequest {
  prompt: string;
  maxTokens?: number;
}

export interface Token {
  text: string;
  index: number;
}

const ANSWER = `agentlink gives every agent one address, its Ed25519 key, and one way to talk: send for a single
answer, stream for many. Underneath, the same calls ride any agentlink channel over mutually authenticated
TLS 1.3, with deadlines that travel to the handler, cancellation that reaches the producer within one round trip,
and backpressure from the slowest reader all the way back to the model. Tokens arrive as they are made, in order,
as real bytes over a real socket, and if the other agent dies mid-sentence the caller gets a typed error instead
of a hang.`;

/**
 * A deterministic stand-in for a language model: the same prompt always yields the same tokens, paced like a
 * real model (a longer wait for the first token, then a steady per-token delay).
 */
export async function* fakeLlm(
  request: GenerateRequest,
  signal: AbortSignal,
  pace = { firstTokenMs: 40, perTokenMs: 8 },
): AsyncGenerator<Token> {
  const words = `You asked: "${request.prompt.trim()}". ${ANSWER.replace(/\s+/g, ' ')}`.split(/(?<= )/);
  const limit = Math.min(words.length, request.maxTokens ?? words.length);
  await sleep(pace.firstTokenMs, undefined, { signal });
  for (let index = 0; index < limit; index++) {
    if (index > 0) await sleep(pace.perTokenMs, undefined, { signal });
    yield { text: words[index]!, index };
  }
}
