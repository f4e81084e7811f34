/** Structured logs: one JSON object per line on stdout (warn and error on stderr), ready for any collector. */
export type Logger = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

export const jsonLogger: Logger = (level, message, fields = {}) => {
  const line = `${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`;
  (level === 'info' ? process.stdout : process.stderr).write(line);
};

export const silentLogger: Logger = () => undefined;
