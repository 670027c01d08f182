import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HttpListener {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export type RequestHandler = (request: IncomingMessage, body: Buffer, response: ServerResponse) => Promise<void> | void;

export function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

/**
 * An HTTP listener on 127.0.0.1 (a random port unless given; another host address for the VM fabric) whose
 * `close()` also ends keep-alive connections — the SDK keeps sockets open, and a server that waits for them
 * never closes.
 */
export async function listen(handler: RequestHandler, port = 0, host = '127.0.0.1'): Promise<HttpListener> {
  const server: Server = createServer((request, response) => {
    readBody(request)
      .then((body) => handler(request, body, response))
      .catch((err: unknown) => {
        if (!response.headersSent) response.writeHead(500, { 'content-type': 'text/plain' });
        response.end(err instanceof Error ? err.message : String(err));
      });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
