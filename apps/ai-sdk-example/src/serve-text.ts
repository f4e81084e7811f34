import { fromReadableStream, type Agent } from '@agentlink/core';
import { streamText, type LanguageModel } from 'ai';

/**
 * Serves the AI SDK's `streamText` as an agentlink stream: each text delta is one item in the caller's
 * `for await`. The call's signal is the model's `abortSignal`, so a caller that cancels (or a deadline) stops
 * the generation upstream, and a slow caller slows the reading of the model's stream (backpressure).
 */
export function serveText(agent: Agent, model: LanguageModel, method = 'generate'): void {
  agent.handleStream(method, async function* ({ prompt }: { prompt: string }, ctx) {
    const result = streamText({ model, prompt, abortSignal: ctx.signal });
    yield* fromReadableStream(result.textStream, ctx.signal);
  });
}
