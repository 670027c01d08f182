import { createHash } from 'node:crypto';
import { chmodSync, closeSync, fstatSync, lstatSync, mkdirSync, openSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { VpcLeaseError } from '../../shared/errors.js';
import { sleepMs } from '../../shared/sleep.js';
import { loadNetnsAddon } from '../datapath/native.js';
import { assertNotAbandoned, callScope } from './call-scope.js';

/**
 * A per-attachment mutex between plugin processes and the agent's calls: flock(2) on a file in a root-only (0700)
 * directory. Only root on the host can open the file, unlike the abstract socket names this replaced, which any
 * process in the host's netns could bind first. The kernel drops the lock when its holder dies.
 */
export class AttachmentBusyError extends VpcLeaseError {}

export class AttachmentLockDirError extends VpcLeaseError {}

export interface AttachmentLock {
  release(): Promise<void>;
}

const LOCK_DIR = 'locks';
const DIR_MODE = 0o700;

/** Short and free of path rules: container ids are not bounded, file names are. */
export function attachmentLockPath(scope: string, containerId: string, ifName: string): string {
  const digest = createHash('sha256').update(`${scope}\u0000${containerId}\u0000${ifName}`).digest('hex');
  return join(scope, LOCK_DIR, digest.slice(0, 40));
}

/** The lock directory, root's and 0700: one someone else owns (or a link) could hand out our lock files. */
function secureLockDir(scope: string): void {
  const dir = join(scope, LOCK_DIR);
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const st = lstatSync(dir);
  const uid = process.getuid?.() ?? 0;
  if (!st.isDirectory() || st.uid !== uid)
    throw new AttachmentLockDirError(`failed to use lock directory ${dir}: not a directory owned by uid ${uid}`);
  if ((st.mode & 0o777) !== DIR_MODE) chmodSync(dir, DIR_MODE);
}

/** The lock if this open file description got it and the path still names that file, else undefined. */
function tryTake(path: string): number | undefined {
  const fd = openSync(path, 'a', 0o600);
  try {
    // A holder unlinks the file before it unlocks: a lock taken on an unlinked inode is nobody's lock.
    if (loadNetnsAddon().tryLock(fd) && fstatSync(fd).ino === statSync(path, { throwIfNoEntry: false })?.ino) return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  closeSync(fd);
  return undefined;
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
  secureLockDir(scope);
  const path = attachmentLockPath(scope, containerId, ifName);
  const deadline = Date.now() + waitMs;
  const call = callScope.getStore();
  for (;;) {
    assertNotAbandoned('the attachment lock');
    const fd = tryTake(path);
    if (fd !== undefined) {
      let held = true;
      const release = async (): Promise<void> => {
        // Once only: the agent releases an abandoned call's lock, and a second unlink would hit the next holder's file.
        if (!held) return;
        held = false;
        call?.locks.delete(release);
        // Unlinked while still held, so no file is left behind and no waiter locks a stale one (see tryTake).
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
        closeSync(fd);
      };
      call?.locks.add(release);
      return { release };
    }
    if (Date.now() >= deadline)
      throw new AttachmentBusyError(
        `another call for ${containerId}/${ifName} is still running after ${waitMs} ms; try again later`,
      );
    await sleepMs(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
  }
}
