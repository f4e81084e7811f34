import { once } from 'node:events';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startBinaryRpcServer } from '../src/binary-rpc-server.js';
import { startJsonRpcServer } from '../src/json-rpc-server.js';
import type { RpcServer } from '../src/mutual-tls-ws-server.js';

/** `agentbench serve --host 0.0.0.0` faces any client: its baseline servers must answer junk, not crash. */
describe("agentbench's hand-written RPC servers, fed junk", () => {
  const servers: RpcServer[] = [];
  afterEach(() => servers.splice(0).forEach((server) => server.close()));

  async function client(url: string): Promise<WebSocket> {
    const tls = selfSignedCertificate(Identity.generate());
    const ws = new WebSocket(url, { key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', rejectUnauthorized: false, perMessageDeflate: false });
    await once(ws, 'open');
    return ws;
  }

  it('JSON-RPC: a message that is not JSON gets a parse error, and the connection still serves echo', async () => {
    const server = await startJsonRpcServer('127.0.0.1', selfSignedCertificate(Identity.generate()));
    servers.push(server);
    const ws = await client(server.url);
    ws.send('{not json');
    const [parseError] = (await once(ws, 'message')) as [Buffer];
    expect(JSON.parse(parseError.toString())).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'echo', params: { data: 'still here' } }));
    const [echo] = (await once(ws, 'message')) as [Buffer];
    expect(JSON.parse(echo.toString())).toEqual({ jsonrpc: '2.0', id: 7, result: 'still here' });
    ws.close();
  });

  it('binary RPC: a message too short to be a request closes that connection with 1002; the server serves the next', async () => {
    const server = await startBinaryRpcServer('127.0.0.1', selfSignedCertificate(Identity.generate()));
    servers.push(server);
    const junk = await client(server.url);
    junk.send(Buffer.from([1, 2, 3]));
    const [code] = (await once(junk, 'close')) as [number];
    expect(code).toBe(1002);
    const next = await client(server.url);
    // id 9, method "echo", body "ok"
    next.send(Buffer.concat([Buffer.from([0, 0, 0, 9, 4]), Buffer.from('echo'), Buffer.from('ok')]));
    const [reply] = (await once(next, 'message')) as [Buffer];
    expect(reply.readUInt32BE(0)).toBe(9);
    expect(reply.subarray(5).toString()).toBe('ok');
    next.close();
  });
});
