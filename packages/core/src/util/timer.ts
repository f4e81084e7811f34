import { MAX_TIMER_MS } from './options.js';

/**
 * A timer for `ms` from now, or none when the deadline is too far away to ever matter to a process (setTimeout
 * fires at once for delays over MAX_TIMER_MS).
 */
export function deadlineTimer(ms: number, onExpire: () => void): NodeJS.Timeout | undefined {
  return ms <= MAX_TIMER_MS ? setTimeout(onExpire, ms) : undefined;
}
