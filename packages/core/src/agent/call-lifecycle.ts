import { diagnosticChannels } from '../diagnostics.js';
import type { AgentError } from '../errors.js';
import type { CallControl, CallHandler } from './interceptor.js';
import type { OutboundCall } from './outbound-call.js';

/**
 * The handler the agent hands its interceptor chain for each call: ties the call's lifecycle to `OutboundCall`
 * (the abort control on start, timers stopped at the end), publishes the diagnostics events when someone
 * listens, and passes every event on to the result (`handler`). One object per call, no closures.
 */
export class CallLifecycle implements CallHandler {
  /** When the call started, if diagnostics listen (0 otherwise: no clock read per call). */
  private readonly started: number;
  /** The call reported its end or failure: anything after it (an attempt cancelled by a failing interceptor) is dropped. */
  private ended = false;

  constructor(
    private readonly call: OutboundCall,
    private readonly handler: CallHandler,
    private readonly observed: boolean,
  ) {
    this.started = observed ? performance.now() : 0;
    call.handledBy(this);
    if (observed) diagnosticChannels.callStart.publish({ call });
  }

  onStart(control: CallControl): void {
    this.call.started(control);
    this.handler.onStart?.(control);
  }

  onResponse(body: unknown): void {
    this.handler.onResponse?.(body);
  }

  onItem(item: unknown, size?: number): void | Promise<void> {
    return this.handler.onItem?.(item, size);
  }

  onEnd(): void {
    if (this.ended) return;
    this.ended = true;
    this.call.finish();
    if (this.observed) diagnosticChannels.callEnd.publish({ call: this.call, durationMs: performance.now() - this.started });
    this.handler.onEnd();
  }

  onError(error: AgentError): void {
    if (this.ended) return;
    this.ended = true;
    this.call.finish();
    if (this.observed) diagnosticChannels.callError.publish({ call: this.call, error, durationMs: performance.now() - this.started });
    this.handler.onError(error);
  }
}
