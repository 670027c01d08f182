import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';

export interface DynaliteHandle {
  readonly endpoint: string;
  close(): Promise<void>;
}

/** A real DynamoDB API server on 127.0.0.1 and a random port, in memory unless `path` is given. */
export async function startDynalite(options: { path?: string } = {}): Promise<DynaliteHandle> {
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(options.path ? { path: options.path } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
