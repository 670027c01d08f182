import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';

export interface DynaliteHandle {
  readonly endpoint: string;
  close(): Promise<void>;
}

/**
 * A real DynamoDB API server on a random port, in memory unless `path` is given; on 127.0.0.1 unless `host` says
 * otherwise (the VM's fabric serves it to the node namespaces).
 */
export async function startDynalite(
  options: { path?: string; host?: string; port?: number } = {},
): Promise<DynaliteHandle> {
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(options.path ? { path: options.path } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://${options.host ?? '127.0.0.1'}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
