/**
 * Runs fuzz inputs through the decoder path as FramedStream does (FrameDecoder.feed/next, then decodePayloadAt on
 * each complete frame where it lies in its chunk) and records what came out: errors by code, anything that is not
 * an AgentError, decoded values that carry a BigInt or a foreign prototype, and the time each input took. Each
 * input is also decoded from copies of its payloads (decodePayload on a copy of each frame, which has nothing past
 * its end): the two must agree, so a reader that looked past a frame's end into the next frame's bytes shows.
 */
import { isDeepStrictEqual } from 'node:util';
import { AgentError } from '../../src/index.js';
import { FrameDecoder, decodePayload } from '../../src/transport.js';
import { decodePayloadAt } from '../../src/wire/codec.js';
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
  /** Times per input are the fastest of up to 4 runs for inputs over 1 ms (see runFuzz). */
  maxMs: number;
  /** The slowest input of each kind, in ms: tells a slow shape from a pause of the machine. */
  maxMsByKind: Record<string, number>;
  p99Ms: number;
  p999Ms: number;
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

interface Outcome {
  decoded: unknown[];
  idle: boolean;
  error?: unknown;
  ms: number;
}

/** The decoder path as FramedStream runs it: a fresh decoder, each chunk fed, each complete frame decoded in place. */
function decode(input: FuzzInput): Outcome {
  const decoded: unknown[] = [];
  const started = performance.now();
  const decoder = new FrameDecoder(input.maxFrameSize);
  try {
    for (const chunk of input.chunks) {
      decoder.feed(chunk);
      while (decoder.next()) {
        const { frameBytes, frameStart, frameEnd } = decoder;
        decoder.release();
        decoded.push(decodePayloadAt(frameBytes, frameStart, frameEnd));
      }
    }
  } catch (error) {
    return { decoded, idle: decoder.idle, error, ms: performance.now() - started };
  }
  return { decoded, idle: decoder.idle, ms: performance.now() - started };
}

/** The same input decoded from a copy of each payload (nothing past a frame's end to read). */
function decodeCopies(input: FuzzInput): Outcome {
  const decoded: unknown[] = [];
  const decoder = new FrameDecoder(input.maxFrameSize);
  try {
    for (const chunk of input.chunks) {
      decoder.feed(chunk);
      while (decoder.next()) decoded.push(decodePayload(Buffer.from(decoder.frameBytes.subarray(decoder.frameStart, decoder.frameEnd))));
    }
  } catch (error) {
    return { decoded, idle: decoder.idle, error, ms: 0 };
  }
  return { decoded, idle: decoder.idle, ms: 0 };
}

/** Where two outcomes of one input differ (messages, the error's code, whether the decoder ended idle), if they do. */
function disagreement(inPlace: Outcome, copied: Outcome): string | undefined {
  const code = (outcome: Outcome): unknown => (outcome.error instanceof AgentError ? outcome.error.code : outcome.error);
  if (code(inPlace) !== code(copied)) return `in place ${String(code(inPlace))}, from copies ${String(code(copied))}`;
  if (inPlace.idle !== copied.idle) return `idle in place ${inPlace.idle}, from copies ${copied.idle}`;
  if (!isDeepStrictEqual(inPlace.decoded, copied.decoded)) return 'messages decoded in place differ from those decoded from copies';
  return undefined;
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
    maxMsByKind: {},
    p99Ms: 0,
    p999Ms: 0,
    medianUs: 0,
    slowestKind: '',
  };
  const fail = (what: string, input: FuzzInput): void => {
    if (report.failures.length < 20) report.failures.push(`${input.kind}: ${what} (${hex(input)})`);
  };

  for (let i = 0; i < options.count; i++) {
    const input = source.next();
    report.inputsByKind[input.kind] = (report.inputsByKind[input.kind] ?? 0) + 1;
    const outcome = decode(input);
    let ms = outcome.ms;
    // An input slower than 1 ms is timed 3 more times and keeps its fastest: on a shared machine a single slow
    // run is as often a pause (GC, another process) as a slow shape; the fastest run tells them apart.
    for (let again = 0; again < 3 && ms > 1; again++) ms = Math.min(ms, decode(input).ms);
    times[i] = ms;
    if (ms > (report.maxMsByKind[input.kind] ?? 0)) report.maxMsByKind[input.kind] = Number(ms.toFixed(3));
    if (ms > report.maxMs) {
      report.maxMs = ms;
      report.slowestKind = input.kind;
    }
    const differs = disagreement(outcome, decodeCopies(input));
    if (differs) fail(differs, input);
    const error = outcome.error;
    if (error === undefined) {
      report.messages += outcome.decoded.length;
      if (!outcome.idle) report.incomplete++;
    } else if (error instanceof AgentError) {
      report.errorsByCode[error.code] = (report.errorsByCode[error.code] ?? 0) + 1;
    } else {
      fail(`threw ${String(error)}`, input);
    }
    for (const message of outcome.decoded) {
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
  report.p999Ms = times[Math.floor(options.count * 0.999)] ?? 0;
  report.medianUs = (times[Math.floor(options.count / 2)] ?? 0) * 1000;
  return report;
}
