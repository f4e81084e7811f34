import { AgentError } from '../errors.js';

/** The AgentError an aborted signal stands for: its reason when that is one, CANCELLED otherwise. */
export function abortReason(signal: AbortSignal): AgentError {
  const reason: unknown = signal.reason;
  if (reason instanceof AgentError) return reason;
  return new AgentError('CANCELLED', 'call aborted', { cause: reason });
}

/** Settles with `promise`, or rejects with the abort reason as soon as `signal` aborts. */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
