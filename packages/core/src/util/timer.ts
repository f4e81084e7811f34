/** setTimeout fires at once for delays over 2^31-1 ms (~24.8 days); longer deadlines need no timer at all. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer for `ms` from now, or none when the deadline is too far away to ever matter to a process. */
export function deadlineTimer(ms: number, onExpire: () => void): NodeJS.Timeout | undefined {
  return ms <= MAX_TIMER_MS ? setTimeout(onExpire, ms) : undefined;
}
