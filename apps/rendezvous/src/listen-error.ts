import { AgentError } from '@agentlink/core';

/**
 * A port the rendezvous could not listen on, as an operator reads it: which port, and what to do (until 2026-11-24
 * the process died with Node's stack trace, or, for the HTTP port, with an unhandled 'error' event). In use
 * (another instance, or the previous one still stopping) is UNAVAILABLE: the process exits 1, and a supervisor
 * starting it again may succeed. A port it may not bind (below 1024 without the privilege) or an address this
 * machine does not have is the configuration's fault: INVALID_ARGUMENT, exit 2. Anything else is passed on as is.
 */
export function listenError(what: string, host: string, port: number, error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const where = `${what} ${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (code === 'EADDRINUSE') return new AgentError('UNAVAILABLE', `${where} is in use (another rendezvous, or the previous one still stopping)`, { cause: error });
  if (code === 'EACCES') return new AgentError('INVALID_ARGUMENT', `${where}: permission denied (a port below 1024 needs CAP_NET_BIND_SERVICE)`, { cause: error });
  if (code === 'EADDRNOTAVAIL') return new AgentError('INVALID_ARGUMENT', `${where}: no such address on this machine (see --host)`, { cause: error });
  return error;
}
