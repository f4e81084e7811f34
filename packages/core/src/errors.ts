/**
 * One error class for everything agentlink reports. Codes are stable strings; each has a small number used
 * where a transport carries only an integer (stream resets, close codes). Remote codes cross the wire, so
 * the caller sees the code the peer raised.
 */
export const ERROR_CODES = {
  UNKNOWN: 0,
  CANCELLED: 1,
  DEADLINE_EXCEEDED: 2,
  UNAVAILABLE: 3,
  NO_HANDLER: 4,
  HANDLER_ERROR: 5,
  FRAME_TOO_LARGE: 6,
  PROTOCOL_ERROR: 7,
  UNAUTHENTICATED: 8,
  INVALID_ARGUMENT: 9,
  RESOURCE_EXHAUSTED: 10,
  INVALID_KEY_FILE: 11,
  CLOSED: 12,
  NOT_FOUND: 13,
  /** The peer is authenticated but not allowed this channel or call (connection gate, inbound interceptor). */
  PERMISSION_DENIED: 14,
} as const;

/** The stable code of every {@link AgentError}, the same on every channel. */
export type ErrorCode = keyof typeof ERROR_CODES;

const CODE_BY_NUMBER = new Map<number, ErrorCode>(
  Object.entries(ERROR_CODES).map(([code, n]) => [n, code as ErrorCode]),
);

/** Codes a caller may retry (on another channel or later) without knowing whether the handler ran. */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set(['UNAVAILABLE', 'RESOURCE_EXHAUSTED', 'CLOSED']);

/** The one error type agentlink raises: a stable `code` (see {@link ERROR_CODES}) and a message. `retryable` tells whether the call may be retried without knowing if the handler ran. */
export class AgentError extends Error {
  override readonly name = 'AgentError';
  /** True when the error was raised by the peer and carried over the wire. */
  readonly remote: boolean;
  /**
   * True when the peer refused the call before processing any of it (e.g. HTTP/2 REFUSED_STREAM): retrying
   * cannot run it twice, so the agent retries such calls transparently, as gRPC does.
   */
  readonly unprocessed: boolean;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { cause?: unknown; remote?: boolean; unprocessed?: boolean } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.remote = options.remote ?? false;
    this.unprocessed = options.unprocessed ?? false;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.code);
  }
}

/** Whether `value` is one of the {@link ErrorCode}s. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** The integer a transport carries for `code` (QUIC and HTTP/2 reset codes). */
export function errorCodeToNumber(code: ErrorCode): number {
  return ERROR_CODES[code];
}

/** The code of an integer read from the wire; an unknown number gives `UNKNOWN` rather than throwing. */
export function errorCodeFromNumber(n: number): ErrorCode {
  return CODE_BY_NUMBER.get(n) ?? 'UNKNOWN';
}

/** Normalises anything thrown into an AgentError, keeping AgentErrors as they are. */
export function toAgentError(error: unknown, fallback: ErrorCode = 'UNKNOWN'): AgentError {
  if (error instanceof AgentError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new AgentError(fallback, message, { cause: error });
}
