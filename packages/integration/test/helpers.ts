import { createAgent, type Agent, type AgentOptions } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';

const started: Agent[] = [];

/** An agent listening on wss://127.0.0.1 (port 0 unless given), closed by `closeAgents`. */
export async function wsAgent(options: Partial<AgentOptions> & { port?: number } = {}): Promise<Agent> {
  const { port = 0, ...rest } = options;
  const agent = await createAgent({ ...rest, channels: [webSocket({ port, host: '127.0.0.1' })] });
  started.push(agent);
  return agent;
}

/** An agent that only dials. */
export async function dialOnlyAgent(options: Partial<AgentOptions> = {}): Promise<Agent> {
  const agent = await createAgent({ ...options, channels: [webSocket({})] });
  started.push(agent);
  return agent;
}

export async function closeAgents(): Promise<void> {
  await Promise.all(started.splice(0).map((a) => a.close()));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A gate calls wait on until the test opens it. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
