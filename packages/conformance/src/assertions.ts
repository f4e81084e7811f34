import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError } from '@agentlink/core';
import { expect } from 'vitest';

/** Resolves with the AgentError a promise rejects with; fails the test if it resolves or throws anything else. */
export async function rejection(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AgentError);
    return error as AgentError;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

/** The promise, or a test failure naming `what` once `ms` have passed (a bound on a hang, not a speed target). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`${what} did not happen within ${ms} ms`)))]);
}

/**
 * Waits until `count` stops moving (unchanged over 300 ms; a loaded machine may take a while to fill a window)
 * and returns where it stopped: the caller of a stalled side asserts the bound on it.
 */
export async function stalledAt(count: () => number): Promise<number> {
  for (let round = 0; round < 40; round++) {
    const before = count();
    await sleep(300);
    if (count() === before && before > 0) return before;
  }
  throw new Error(`still moving after 12 s: ${count()}`);
}
