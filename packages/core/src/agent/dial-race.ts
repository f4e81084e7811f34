import { AgentError, toAgentError } from '../errors.js';
import type { Channel } from '../channel.js';
import { abortReason } from '../util/abort.js';

/**
 * Dials candidates in order, happy-eyeballs style: the next attempt starts when the previous one fails or after
 * `staggerMs`, whichever comes first. The first channel wins; the other attempts are cancelled, and one that
 * completes anyway is closed. Fails with the outer signal's reason if it aborts, else with every failure.
 */
export function raceDials<T>(
  candidates: readonly T[],
  dial: (candidate: T, signal: AbortSignal) => Promise<Channel>,
  signal: AbortSignal,
  staggerMs: number,
): Promise<{ channel: Channel; failures: AgentError[] }> {
  return new Promise((resolve, reject) => {
    const failures: AgentError[] = [];
    const attempts: AbortController[] = [];
    let finished = 0;
    let winner = -1;
    let timer: NodeJS.Timeout | undefined;

    const settleFailure = (): void => {
      clearTimeout(timer);
      reject(signal.aborted ? abortReason(signal) : failures);
    };
    const startNext = (): void => {
      clearTimeout(timer);
      const index = attempts.length;
      if (winner >= 0 || index >= candidates.length) return;
      const attempt = new AbortController();
      attempts.push(attempt);
      const onAbort = (): void => attempt.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      dial(candidates[index]!, attempt.signal)
        .then(
          (channel) => {
            if (winner >= 0) return void channel.close(new AgentError('CLOSED', 'another dial to this peer won'));
            winner = index;
            clearTimeout(timer);
            attempts.forEach((other, i) => i !== index && other.abort(new AgentError('CANCELLED', 'another dial won')));
            resolve({ channel, failures });
          },
          (error: unknown) => {
            failures.push(toAgentError(error, 'UNAVAILABLE'));
            if (winner >= 0) return;
            if (++finished === candidates.length) settleFailure();
            else startNext(); // a failure hands over at once, without waiting out the stagger
          },
        )
        .finally(() => signal.removeEventListener('abort', onAbort));
      if (attempts.length < candidates.length) timer = setTimeout(startNext, staggerMs);
    };

    if (candidates.length === 0) return reject(failures);
    startNext();
  });
}
