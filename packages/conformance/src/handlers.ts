import { EventEmitter } from 'node:events';
import { closeSync, openSync, readSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError, type Agent, type ErrorCode } from '@agentlink/core';

/**
 * The methods every conformance peer serves. `events` lets in-process tests observe the handler side:
 * 'finally' (method, abort reason), 'produced' (count), 'aborted' (reason).
 */
export function installConformanceHandlers(agent: Agent, events = new EventEmitter()): EventEmitter {
  agent.handle('echo', (body: unknown) => body);
  agent.handle('context', (_body: unknown, ctx) => ({
    peer: ctx.peer,
    method: ctx.method,
    deadline: ctx.deadline ?? null,
    priority: ctx.priority,
    metadata: ctx.metadata,
    remoteAddress: ctx.remoteAddress,
  }));
  agent.handle('throw', (message: string) => {
    throw new Error(message);
  });
  agent.handle('throw-code', ({ code, message }: { code: ErrorCode; message: string }) => {
    throw new AgentError(code, message);
  });
  agent.handle('wait-for-abort', (_body: unknown, ctx) => {
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        events.emit('aborted', ctx.signal.reason);
        reject(ctx.signal.reason);
      });
    });
  });
  agent.handleStream('tokens', async function* (body: { count: number; delayMs?: number }, ctx) {
    try {
      for (let i = 0; i < body.count; i++) {
        if (body.delayMs) await sleep(body.delayMs, undefined, { signal: ctx.signal });
        yield `token-${i}`;
      }
    } finally {
      events.emit('finally', 'tokens', ctx.signal.reason);
    }
  });
  agent.handleStream('firehose', async function* (body: { itemBytes: number }, ctx) {
    let produced = 0;
    try {
      for (;;) {
        produced++;
        events.emit('produced', produced);
        yield Buffer.alloc(body.itemBytes, produced % 251);
      }
    } finally {
      events.emit('finally', 'firehose', ctx.signal.reason);
    }
  });
  // A producer that writes a burst without waiting, then blocks its thread (as a CPU-bound step would) until the
  // caller writes to the FIFO at `release`: only what the channel sent during the burst can reach the caller
  // meanwhile. For a peer process only (it blocks the process it runs in).
  agent.handleStream('burst-then-block', async function* (body: { count: number; release: string }) {
    for (let i = 0; i < body.count; i++) yield `token-${i}`;
    const fd = openSync(body.release, 'r'); // returns once the caller opens the FIFO for writing
    try {
      readSync(fd, Buffer.alloc(1));
    } finally {
      closeSync(fd);
    }
    yield 'released';
  });
  agent.handle('call-back', (body: unknown, ctx) => agent.send(ctx.peer, 'echo', body));
  // An orchestrator: streams from another agent and forwards the items, with the call's signal (chain cases).
  agent.handleStream('relay', async function* (body: { to: string; method: string; body: unknown }, ctx) {
    yield* agent.stream(body.to, body.method, body.body, { signal: ctx.signal });
  });
  return events;
}
