import type { Channel } from '@agentlink/core/transport';

/**
 * Dials every URL at once and keeps the first channel; the rest are cancelled (or closed if they complete
 * anyway). Resolves undefined when none succeeds within `timeoutMs`, rejects only if `signal` aborts.
 */
export function dialFirst(
  urls: readonly string[],
  dial: (url: string, signal: AbortSignal) => Promise<Channel>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Channel | undefined> {
  if (urls.length === 0) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const attempts = new AbortController();
    let winner: Channel | undefined;
    let pending = urls.length;
    const finish = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      attempts.abort();
    };
    const timer = setTimeout(() => {
      finish();
      resolve(undefined);
    }, timeoutMs);
    const onAbort = (): void => {
      finish();
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    for (const url of urls) {
      dial(url, attempts.signal).then(
        (channel) => {
          if (winner || attempts.signal.aborted) return void channel.close();
          winner = channel;
          finish();
          resolve(channel);
        },
        () => {
          if (--pending === 0 && !winner && !attempts.signal.aborted) {
            finish();
            resolve(undefined);
          }
        },
      );
    }
  });
}
