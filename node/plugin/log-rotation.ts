import { randomBytes } from 'node:crypto';
import { linkSync, lstatSync, readlinkSync, renameSync, statSync, symlinkSync, unlinkSync } from 'node:fs';

/** How big the log may grow and how many rotated generations stay (`cni.log.1` newest … `cni.log.N`). */
export interface LogBound {
  readonly maxBytes: number;
  readonly keepFiles: number;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function renameIfPresent(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw err;
  }
}

/** A rotation holds the shift lock for microseconds; one older than this belongs to a process that died holding it. */
const SHIFT_LOCK_STALE_MS = 10_000;
/** How long a rotation waits for the shift lock before leaving its lines under the claim's name instead. */
const SHIFT_LOCK_WAIT_MS = 30_000;
const SLEEP_CELL = new Int32Array(new SharedArrayBuffer(4));

/** The logger is synchronous (it must not lose a line to an exit), so the wait for the lock is too. */
function sleepMs(ms: number): void {
  Atomics.wait(SLEEP_CELL, 0, 0, ms);
}

function readToken(lock: string): string | undefined {
  try {
    return readlinkSync(lock);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Removes a lock whose holder died. It is renamed aside first and removed only if it is still the lock that was
 * judged stale; a fresh lock taken meanwhile by another process is linked back.
 */
function breakIfStale(lock: string, ownToken: string): void {
  let ageMs: number;
  try {
    ageMs = Date.now() - lstatSync(lock).mtimeMs;
  } catch (err) {
    if (errno(err) === 'ENOENT') return;
    throw err;
  }
  const judged = readToken(lock);
  if (ageMs < SHIFT_LOCK_STALE_MS || judged === undefined) return;
  const aside = `${lock}.stale-${ownToken}`;
  renameIfPresent(lock, aside);
  const taken = readToken(aside);
  if (taken === undefined) return;
  if (taken !== judged) {
    try {
      linkSync(aside, lock);
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
    }
  }
  unlinkSync(aside);
}

/**
 * Shifting the generations renames over existing names, so two rotations shifting at once can overwrite a
 * generation: they take turns under a lock, a symlink naming its holder. Returns the token, or undefined when
 * the wait ran out.
 */
function takeShiftLock(lock: string): string | undefined {
  const token = `${process.pid}.${randomBytes(6).toString('hex')}`;
  const deadline = Date.now() + SHIFT_LOCK_WAIT_MS;
  while (Date.now() < deadline) {
    try {
      symlinkSync(token, lock);
      return token;
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
    }
    breakIfStale(lock, token);
    sleepMs(1);
  }
  return undefined;
}

function releaseShiftLock(lock: string, token: string): void {
  if (readToken(lock) === token) unlinkSync(lock);
}

/**
 * Rotates `path` once it holds `maxBytes` or more. Many plugin processes write the log at once, each appending
 * by path, so exactly one of them may rotate a given file: the one whose hard link named after the file's
 * inode succeeds. Until it unlinks `path` nobody else can create a new file there to rotate, and a write that
 * opened the old file just before still lands in it (now `path.1`). The generations are then shifted under the
 * shift lock. A rotation that dies or cannot get the lock leaves its lines in `path.rotating-<inode>`, never
 * loses them. Returns whether this call rotated.
 */
export function rotateIfFull(path: string, bound: LogBound): boolean {
  let ino: number;
  try {
    const st = statSync(path);
    if (st.size < bound.maxBytes) return false;
    ino = st.ino;
  } catch (err) {
    if (errno(err) === 'ENOENT') return false;
    throw err;
  }
  const claim = `${path}.rotating-${ino}`;
  try {
    linkSync(path, claim);
  } catch (err) {
    if (errno(err) === 'EEXIST' || errno(err) === 'ENOENT') return false;
    throw err;
  }
  // Another process may have rotated this inode away between our stat and our link.
  if (statSync(path, { throwIfNoEntry: false })?.ino !== ino) {
    unlinkSync(claim);
    return false;
  }
  unlinkSync(path);
  if (bound.keepFiles < 1) {
    unlinkSync(claim);
    return true;
  }
  const lock = `${path}.shift-lock`;
  const token = takeShiftLock(lock);
  if (token === undefined) return true;
  try {
    for (let n = bound.keepFiles - 1; n >= 1; n--) renameIfPresent(`${path}.${n}`, `${path}.${n + 1}`);
    renameSync(claim, `${path}.1`);
  } finally {
    releaseShiftLock(lock, token);
  }
  return true;
}
