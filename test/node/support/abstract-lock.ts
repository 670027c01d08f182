import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { AttachmentBusyError, type AttachmentLock } from '../../../node/journal/lock.js';
import { sleepMs } from '../../../shared/sleep.js';

/**
 * The control for test/node/attachment-lock.test.ts: the per-attachment lock as it was before issue 35, a unix
 * socket bound in the abstract namespace of the host's netns, where any process at any uid can bind its name first.
 */
export function abstractLockName(scope: string, containerId: string, ifName: string): string {
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
export async function abstractLockAttachment(
  scope: string,
  containerId: string,
  ifName: string,
  waitMs: number,
): Promise<AttachmentLock> {
  const name = abstractLockName(scope, containerId, ifName);
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
