/**
 * The deadline a handler's `ctx.signal` stands for. A handler that calls on (an orchestrator streaming from a
 * model) passes its `ctx.signal` to the nested call; the call then also takes the handler's deadline, so the next
 * agent sees it as its own `ctx.deadline` and the nested call ends with DEADLINE_EXCEEDED on time even if the
 * cancel never arrives. Kept beside the signal rather than on it: an AbortSignal has no place for it, and a
 * signal derived from it (`AbortSignal.any`) is another object and carries no deadline.
 */
const deadlines = new WeakMap<AbortSignal, number>();

/** Marks `signal` as aborting by `deadline` (epoch milliseconds). */
export function setSignalDeadline(signal: AbortSignal, deadline: number): void {
  deadlines.set(signal, deadline);
}

/** `signal`'s call no longer has that deadline (its tunnel is open, or the call is over): calls made with it now keep their own. */
export function clearSignalDeadline(signal: AbortSignal): void {
  deadlines.delete(signal);
}

/** The deadline `signal` was marked with, if it is a handler's `ctx.signal` with a deadline. */
export function signalDeadline(signal: AbortSignal): number | undefined {
  return deadlines.get(signal);
}
