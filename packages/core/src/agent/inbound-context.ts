import type { AgentId } from '../identity/agent-id.js';
import type { LazyAbort } from '../util/lazy-abort.js';
import { clearSignalDeadline, setSignalDeadline } from '../util/signal-deadline.js';
import type { Priority } from '../wire/messages.js';
import type { CallContext } from './handlers.js';

/**
 * What a handler sees of the call it serves. A class rather than an object literal on purpose: a literal with a
 * `signal` getter gets a hidden class of its own per call, which V8 keeps in old space until a full collection,
 * and through it every call's objects survived young-generation collections (~1.7 KB promoted per call, the
 * server's main GC cost). The getter here lives on the prototype, and the signal is made only when read.
 */
export class InboundContext implements CallContext {
  readonly #aborted: LazyAbort;
  /** The signal was marked with the deadline, or the deadline ended (`deadlineEnded`): it is not marked again. */
  #marked = false;

  constructor(
    readonly peer: AgentId,
    readonly remoteAddress: string,
    readonly method: string,
    aborted: LazyAbort,
    readonly deadline: number | undefined,
    readonly priority: Priority,
    readonly metadata: Readonly<Record<string, string>>,
  ) {
    this.#aborted = aborted;
  }

  /** Marked with the call's deadline: a call made with it inherits the deadline (`signal-deadline.ts`). */
  get signal(): AbortSignal {
    const signal = this.#aborted.signal;
    if (!this.#marked && this.deadline !== undefined) {
      setSignalDeadline(signal, this.deadline); // once: handlers read `ctx.signal.aborted` per item
      this.#marked = true;
    }
    return signal;
  }

  /**
   * The call's deadline stopped applying (core cleared its timer: the tunnel opened, or the call is over). The
   * signal then no longer aborts at the deadline, so a call made with it later (a tunnel's owner calling on, work
   * the handler left running) takes its own deadline: cut to this one, it failed DEADLINE_EXCEEDED at once.
   */
  deadlineEnded(): void {
    if (this.#marked && this.deadline !== undefined) clearSignalDeadline(this.#aborted.signal);
    this.#marked = true;
  }
}
