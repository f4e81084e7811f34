/**
 * Run: `pnpm --filter @agentlink/example-ai-sdk start`. Two agents on loopback: one serves streamText (with the
 * AI SDK's mock model), the other prints the tokens as they arrive.
 */
import { createAgent } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { mockModel, serveText } from './index.js';

const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
serveText(server, mockModel(['Agents ', 'talking ', 'over ', 'agentlink.\n'], 50));
const caller = await createAgent({ channels: [webSocket()] });
for await (const token of caller.stream<string>(server.addresses[0]!, 'generate', { prompt: 'Say hello' })) process.stdout.write(token);
await caller.close();
await server.close();
