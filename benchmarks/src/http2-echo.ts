import type { ServerHttp2Stream } from 'node:http2';

/** The raw node:http2 servers' echo: the whole request body back as the response, once the request ended. */
export function answerEcho(stream: ServerHttp2Stream): void {
  const parts: Buffer[] = [];
  stream.on('data', (d: Buffer) => parts.push(d));
  stream.on('end', () => {
    stream.respond({ ':status': 200 });
    stream.end(Buffer.concat(parts));
  });
}
