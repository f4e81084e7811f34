import type { AgentError } from '../errors.js';

/**
 * An abort reason, with an AbortSignal made only when someone asks for one: an AbortController per call was
 * ~5% of a call's CPU in a profile, and most calls never need a signal.
 */
export class LazyAbort {
  private controller: AbortController | undefined;
  private abortedWith: AgentError | undefined;

  get reason(): AgentError | undefined {
    return this.abortedWith;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  /** Records the reason and aborts the signal if one was made; false when already aborted. */
  abort(reason: AgentError): boolean {
    if (this.abortedWith) return false;
    this.abortedWith = reason;
    this.controller?.abort(reason);
    return true;
  }
}
