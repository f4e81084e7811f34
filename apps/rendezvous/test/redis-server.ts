import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';

/** A redis-server of the test's own on loopback: no persistence (a restart starts empty, as after a crash). */
export interface TestRedis {
  url: string;
  port: number;
  /** Stops the server (SIGKILL: a crash) and waits for it to exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** A free loopback TCP port from the OS (the server binds it a moment later; a rare collision is retried). */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function launch(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ready to accept connections')) resolve(child);
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out.slice(-500)}`)));
  });
}

export async function startTestRedis(): Promise<TestRedis> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      let child: ChildProcess | undefined = await launch(port);
      const kill = async (): Promise<void> => {
        const running = child;
        child = undefined;
        if (!running || running.exitCode !== null) return;
        const exited = once(running, 'exit');
        running.kill('SIGKILL');
        await exited;
      };
      return {
        url: `redis://127.0.0.1:${port}`,
        port,
        kill,
        async start() {
          child = await launch(port);
        },
        stop: kill,
      };
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}
