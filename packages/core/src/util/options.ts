import { AgentError } from '../errors.js';

/**
 * Per-option validation (undici's style): each option is checked on its own and a wrong one is named with what it
 * must be and what it was, as INVALID_ARGUMENT, when the object that takes it is made — not at first use.
 */
function invalid(name: string, must: string, value: unknown): AgentError {
  return new AgentError('INVALID_ARGUMENT', `${name} must be ${must}, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
}

/** An integer ≥ 1 (a count or a size), or `fallback` when absent. */
export function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw invalid(name, 'a positive integer', value);
  return value;
}

/** An integer ≥ 0 (a count where 0 means none, or a duration where 0 means off), or `fallback` when absent. */
export function nonNegativeInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw invalid(name, 'a non-negative integer', value);
  return value;
}

/** A finite number > 0 (a rate or a duration), or `fallback` when absent. */
export function positiveNumber(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw invalid(name, 'a positive number', value);
  return value;
}

/** A finite number ≥ 0, or `fallback` when absent. */
export function nonNegativeNumber(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw invalid(name, 'a non-negative number', value);
  return value;
}

/** An integer from `min` to `max` (a protocol field's range, a timer's), or `fallback` when absent. */
export function integerInRange(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw invalid(name, `an integer from ${min} to ${max}`, value);
  return value;
}

/**
 * The longest delay node's timers take (2^31 − 1 ms, ~24.8 days): a longer one fires after 1 ms instead, with a
 * warning, so an interval or timeout option above it would do the opposite of what was asked.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
