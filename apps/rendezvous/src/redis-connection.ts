import { AgentError } from '@agentlink/core';
import { RESP_TYPES, createClient, type RedisArgument } from '@redis/client';

/**
 * One connection to Valkey/Redis, by node-redis (`@redis/client`; chosen by measurement over ioredis and
 * iovalkey, see docs/rendezvous.md). Commands fail at once while the server is away (no offline queue: a
 * registration must not wait minutes behind a dead server); the client reconnects by itself, and a subscriber
 * resubscribes.
 */
export interface RedisConnection {
  /** Sends one command; bulk strings come back as Buffers. Throws UNAVAILABLE while the server is unreachable. */
  command<T>(args: RedisArgument[]): Promise<T>;
  /** Runs a Lua script by its SHA1, loading it once when the server does not know it (after a restart). */
  script<T>(source: string, keys: RedisArgument[], args: RedisArgument[]): Promise<T>;
  readonly ready: boolean;
  readonly raw: ReturnType<typeof createRawClient>;
  close(): Promise<void>;
}

/** Bulk strings as Buffers: records and signatures are bytes. */
const BUFFERS = { [RESP_TYPES.BLOB_STRING]: Buffer };

function createRawClient(url: string) {
  return createClient({
    url,
    disableOfflineQueue: true,
    socket: { connectTimeout: 2000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 1000) },
  }).withTypeMapping(BUFFERS);
}

/** Connects to `url` (redis://host:port/db); rejects with UNAVAILABLE when the server does not answer in time. */
export async function connectRedis(url: string, onError: (error: Error) => void = () => undefined): Promise<RedisConnection> {
  const client = createRawClient(url);
  client.on('error', onError);
  const shas = new Map<string, string>();
  try {
    await withTimeout(client.connect(), 5000, `Redis at ${url} did not answer`);
  } catch (error) {
    await client.destroy();
    throw error instanceof AgentError ? error : new AgentError('UNAVAILABLE', `cannot reach Redis at ${url}: ${(error as Error).message}`);
  }
  const command = async <T>(args: RedisArgument[]): Promise<T> => {
    try {
      return (await client.sendCommand(args, { typeMapping: BUFFERS })) as T;
    } catch (error) {
      if (error instanceof AgentError) throw error;
      // Every failure of the store is the store's, not the caller's: agents retry at their next heartbeat.
      throw new AgentError('UNAVAILABLE', `registry store: ${(error as Error).message}`, { cause: error });
    }
  };
  return {
    command,
    async script<T>(source: string, keys: RedisArgument[], args: RedisArgument[]): Promise<T> {
      let sha = shas.get(source);
      if (sha === undefined) {
        sha = String(await command<Buffer>(['SCRIPT', 'LOAD', source]));
        shas.set(source, sha);
      }
      const call = (): Promise<T> => command<T>(['EVALSHA', sha!, String(keys.length), ...keys, ...args]);
      try {
        return await call();
      } catch (error) {
        // A restarted server forgot its scripts.
        if (!String((error as Error).message).includes('NOSCRIPT')) throw error;
        await command(['SCRIPT', 'LOAD', source]);
        return call();
      }
    },
    get ready() {
      return client.isReady;
    },
    raw: client,
    async close() {
      if (client.isOpen) await client.close().catch(() => client.destroy());
      else client.destroy();
    },
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new AgentError('UNAVAILABLE', message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
