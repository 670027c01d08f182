import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { VpcLeaseError } from '../../shared/errors.js';
import { sleepMs } from '../../shared/sleep.js';

/**
 * A per-attachment mutex between plugin processes: a Unix socket bound in the abstract namespace. bind(2) is the
 * test-and-set, and the kernel unbinds it when its process dies, so a crashed or killed ADD never leaves a stale
 * lock to take over, and a live one (however long it hangs) is never run beside. The namespace belongs to the
 * network namespace, which for every CNI call is the runtime's (the host's).
 */
export class AttachmentBusyError extends VpcLeaseError {}

export interface AttachmentLock {
  release(): Promise<void>;
}

/** Stable, short and free of path rules: abstract names are at most 107 bytes, container ids are not bounded. */
function lockName(scope: string, containerId: string, ifName: string): string {
  const digest = createHash('sha256').update(`${scope}\u0000${containerId}\u0000${ifName}`).digest('hex');
  return `\u0000vpc-lease-cni/${digest.slice(0, 40)}`;
}

function tryBind(name: string): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') resolve(undefined);
      else reject(err);
    });
    server.listen(name, () => {
      server.unref();
      resolve(server);
    });
  });
}

const POLL_MS = 50;

/**
 * Takes the lock of (containerId, ifName) within `scope` (the data dir: two plugin installs never contend),
 * waiting at most `waitMs` for a holder to finish. @throws AttachmentBusyError when the holder is still running.
 */
export async function lockAttachment(
  scope: string,
  containerId: string,
  ifName: string,
  waitMs: number,
): Promise<AttachmentLock> {
  const name = lockName(scope, containerId, ifName);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const server = await tryBind(name);
    if (server) return { release: () => new Promise((resolve) => server.close(() => resolve())) };
    if (Date.now() >= deadline)
      throw new AttachmentBusyError(
        `another call for ${containerId}/${ifName} is still running after ${waitMs} ms; try again later`,
      );
    await sleepMs(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
  }
}
