import type { Transport } from '@agentlink/core';

/** What a channel package gives the conformance suite. */
export interface ConformanceTarget {
  /** Shown in test names, e.g. "ws". */
  name: string;
  /** A module URL (file:// of the package entry) a child process can import; it must export `factory`. */
  module: string;
  /** The export of `module` that makes a transport from options, e.g. "webSocket". */
  factory: string;
  /** Options that make a listening transport on loopback. */
  listenOptions: Record<string, unknown>;
  /** Options that make a dial-only transport (default: {}). */
  dialOptions?: Record<string, unknown>;
  /** What the listening port speaks, for the garbage-on-the-port test. */
  socket: 'tcp' | 'udp';
  /** Upper bound of bytes in flight on one stream when the reader stops (flow-control window + buffers). */
  maxStreamBufferBytes?: number;
  /**
   * The factory takes `mux: MuxOptions` because the channel's streams are core's mux (ws): the suite then checks
   * that two sides with different mux windows work together.
   */
  muxOptions?: boolean;
}

export type TransportFactory = (options: Record<string, unknown>) => Transport;

export async function loadFactory(target: Pick<ConformanceTarget, 'module' | 'factory'>): Promise<TransportFactory> {
  const module = (await import(target.module)) as Record<string, unknown>;
  const factory = module[target.factory];
  if (typeof factory !== 'function') throw new Error(`${target.module} does not export a function "${target.factory}"`);
  return factory as TransportFactory;
}
