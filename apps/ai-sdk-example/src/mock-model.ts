import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';

/** The AI SDK's own mock model, streaming `tokens` as text deltas: the example runs without a provider or network. */
export function mockModel(tokens: readonly string[], chunkDelayInMs: number | null = null): MockLanguageModelV3 {
  const chunks: LanguageModelV3StreamPart[] = [
    { type: 'text-start', id: 't' },
    ...tokens.map((delta): LanguageModelV3StreamPart => ({ type: 'text-delta', id: 't', delta })),
    { type: 'text-end', id: 't' },
    {
      type: 'finish',
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: tokens.length, text: tokens.length, reasoning: undefined },
      },
    },
  ];
  return new MockLanguageModelV3({ doStream: async () => ({ stream: simulateReadableStream({ chunks, chunkDelayInMs }) }) });
}
