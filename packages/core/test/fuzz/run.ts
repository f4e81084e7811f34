/**
 * Runs fuzz inputs through the decoder path as FramedStream does (FrameDecoder.push, then decodePayload for each
 * complete frame) and records what came out: errors by code, anything that is not an AgentError, decoded values
 * that carry a BigInt or a foreign prototype, and the time each input took.
 */
import { AgentError, FrameDecoder, decodePayload } from '../../src/index.js';
import { InputSource, Rng, type FuzzInput } from './inputs.js';

export interface FuzzReport {
  inputs: number;
  /** Frames decoded into messages. */
  messages: number;
  /** Inputs that ended inside a frame (FramedStream reports that as PROTOCOL_ERROR when the stream ends). */
  incomplete: number;
  errorsByCode: Record<string, number>;
  inputsByKind: Record<string, number>;
  /** Anything thrown that is not an AgentError, and decoded values with a BigInt or a foreign prototype. */
  failures: string[];
  maxMs: number;
  p99Ms: number;
  medianUs: number;
  slowestKind: string;
}

const PLAIN_PROTOTYPES = new Set<unknown>([Object.prototype, Array.prototype, Buffer.prototype, Uint8Array.prototype, null]);

/** A decoded value may hold only plain data: no BigInt, no object whose prototype was set by the peer. */
function foreignIn(value: unknown, depth = 0): string | undefined {
  if (typeof value === 'bigint') return 'a BigInt';
  if (typeof value !== 'object' || value === null || depth > 64) return undefined;
  if (!PLAIN_PROTOTYPES.has(Object.getPrototypeOf(value))) return 'an object with a foreign prototype';
  if (value instanceof Uint8Array) return undefined;
  for (const child of Object.values(value)) {
    const found = foreignIn(child, depth + 1);
    if (found) return found;
  }
  return undefined;
}

function hex(input: FuzzInput): string {
  return Buffer.concat(input.chunks).subarray(0, 48).toString('hex');
}

export function runFuzz(options: { count: number; seed: number; onProgress?(done: number): void }): FuzzReport {
  const source = new InputSource(new Rng(options.seed));
  const times = new Float64Array(options.count);
  const report: FuzzReport = {
    inputs: options.count,
    messages: 0,
    incomplete: 0,
    errorsByCode: {},
    inputsByKind: {},
    failures: [],
    maxMs: 0,
    p99Ms: 0,
    medianUs: 0,
    slowestKind: '',
  };
  const fail = (what: string, input: FuzzInput): void => {
    if (report.failures.length < 20) report.failures.push(`${input.kind}: ${what} (${hex(input)})`);
  };

  for (let i = 0; i < options.count; i++) {
    const input = source.next();
    report.inputsByKind[input.kind] = (report.inputsByKind[input.kind] ?? 0) + 1;
    const decoded: unknown[] = [];
    let decoder: FrameDecoder | undefined;
    let threw = false;
    const started = performance.now();
    try {
      decoder = new FrameDecoder(input.maxFrameSize);
      for (const chunk of input.chunks) {
        for (const payload of decoder.push(chunk)) decoded.push(decodePayload(payload));
      }
    } catch (error) {
      threw = true;
      if (error instanceof AgentError) report.errorsByCode[error.code] = (report.errorsByCode[error.code] ?? 0) + 1;
      else fail(`threw ${String(error)}`, input);
    }
    const ms = performance.now() - started;
    times[i] = ms;
    if (ms > report.maxMs) {
      report.maxMs = ms;
      report.slowestKind = input.kind;
    }
    report.messages += decoded.length;
    if (!threw && decoder && !decoder.idle) report.incomplete++;
    for (const message of decoded) {
      const found = foreignIn(message);
      if (found) fail(`decoded ${found}`, input);
    }
    if (options.onProgress && (i + 1) % 100_000 === 0) options.onProgress(i + 1);
  }
  if (Object.keys(Object.prototype).length > 0 || ({} as Record<string, unknown>)['polluted'] !== undefined) {
    report.failures.push('Object.prototype was polluted');
  }
  times.sort();
  report.p99Ms = times[Math.floor(options.count * 0.99)] ?? 0;
  report.medianUs = (times[Math.floor(options.count / 2)] ?? 0) * 1000;
  return report;
}
