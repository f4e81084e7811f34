import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, type TLSSocket } from 'node:tls';
import { Identity } from '@agentlink/core';
import { secureContextOf, selfSignedCertificate } from '@agentlink/core/transport';

/**
 * A WebSocket client written by hand, below the `ws` library, so a test can do what no polite client does:
 * stop reading its socket while it floods frames. It authenticates like any agent (its own key's certificate).
 */
export class RawWebSocket {
  private constructor(
    readonly socket: TLSSocket,
    /** The HTTP status line the server answered the upgrade with. */
    readonly status: number,
  ) {}

  /** Opens TLS, sends an HTTP request for `path` (an upgrade unless `upgrade` is false) and reads the answer's head. */
  static async connect(url: URL, path: string, options: { upgrade?: boolean; method?: string; localAddress?: string } = {}): Promise<RawWebSocket> {
    const identity = Identity.generate();
    const socket = connect({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port),
      secureContext: secureContextOf(selfSignedCertificate(identity)),
      rejectUnauthorized: false,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
    });
    socket.on('error', () => undefined); // the server may reset us; 'close' follows
    await once(socket, 'secureConnect');
    const upgrade = options.upgrade ?? true;
    const headers = [
      `${options.method ?? 'GET'} ${path} HTTP/1.1`,
      `host: ${url.host}`,
      ...(upgrade ? ['connection: Upgrade', 'upgrade: websocket', 'sec-websocket-version: 13', `sec-websocket-key: ${randomBytes(16).toString('base64')}`] : []),
      '',
      '',
    ];
    socket.write(headers.join('\r\n'));
    const head = await readHead(socket);
    return new RawWebSocket(socket, Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0));
  }

  /** One binary WebSocket message (masked with a zero key, as a client must mask and any key will do). */
  static frame(payload: Uint8Array): Buffer {
    const length = payload.length;
    const header =
      length < 126
        ? Buffer.from([0x82, 0x80 | length])
        : length < 65_536
          ? Buffer.from([0x82, 0x80 | 126, length >> 8, length & 0xff])
          : (() => {
              const h = Buffer.alloc(10);
              h[0] = 0x82;
              h[1] = 0x80 | 127;
              h.writeBigUInt64BE(BigInt(length), 2);
              return h;
            })();
    return Buffer.concat([header, Buffer.alloc(4), payload]);
  }

  get closed(): boolean {
    return this.socket.destroyed || this.socket.writableEnded;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Reads up to the end of an HTTP response head, then pauses the socket (nothing more is read unless asked). */
function readHead(socket: TLSSocket): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (data: Buffer): void => {
      buffered += data.toString('latin1');
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      resolve(buffered.slice(0, end));
    };
    const onClose = (): void => (buffered ? resolve(buffered) : reject(new Error('the server closed the connection without answering')));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}
